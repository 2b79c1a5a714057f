pub fn first(v: &[i32]) -> Option<i32> { v.first().copied() }

#[cfg(test)]
mod tests {
    #[test]
    fn empty() { assert_eq!(super::first(&[]).unwrap(), 0); }
}
