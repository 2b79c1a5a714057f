pub fn n() -> u8 { "x" }
