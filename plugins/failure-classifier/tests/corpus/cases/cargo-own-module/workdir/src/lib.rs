use crate::parser::parse;

pub fn run() -> i32 { parse() }
