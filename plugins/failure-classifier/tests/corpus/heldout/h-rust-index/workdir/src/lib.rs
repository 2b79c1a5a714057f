pub fn last(v: &[i32]) -> i32 { v[v.len()] }

#[cfg(test)]
mod tests {
    #[test]
    fn last() { assert_eq!(super::last(&[1, 2]), 2); }
}
