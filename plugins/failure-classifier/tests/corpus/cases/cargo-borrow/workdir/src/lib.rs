pub fn f() -> usize {
    let mut v = vec![1];
    let first = &v[0];
    v.push(2);
    *first
}
