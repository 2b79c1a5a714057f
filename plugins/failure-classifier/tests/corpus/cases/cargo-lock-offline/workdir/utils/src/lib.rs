pub fn u() {}
