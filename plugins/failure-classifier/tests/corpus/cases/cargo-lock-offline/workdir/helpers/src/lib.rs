pub fn h() {}
