#[cfg(test)]
mod tests {
    #[test]
    fn even_nanos() {
        let n = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        assert!(n % 2 == 0, "odd nanos {}", n);
    }
}
