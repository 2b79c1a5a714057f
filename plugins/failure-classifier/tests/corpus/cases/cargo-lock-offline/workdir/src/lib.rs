pub fn f() { utils::u() }
