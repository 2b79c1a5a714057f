#![deny(warnings)]

pub fn f() -> i32 {
    let unused = 3;
    1
}
