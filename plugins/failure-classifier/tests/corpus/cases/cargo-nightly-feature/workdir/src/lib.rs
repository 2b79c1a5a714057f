#![feature(test)]
extern crate test;

pub fn f() -> u8 { 1 }
