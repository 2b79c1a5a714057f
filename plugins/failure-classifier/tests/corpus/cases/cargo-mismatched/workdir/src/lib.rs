pub fn name() -> String { 42 }
