pub fn words(s: &str) -> usize { s.split_words().count() }
