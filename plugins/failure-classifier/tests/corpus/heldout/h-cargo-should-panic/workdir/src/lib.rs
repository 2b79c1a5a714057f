pub fn div(a: i32, b: i32) -> i32 { if b == 0 { 0 } else { a / b } }

#[cfg(test)]
mod tests {
    #[test]
    #[should_panic]
    fn by_zero() { super::div(1, 0); }
}
