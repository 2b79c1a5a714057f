#[link(name = "zstdcorpus")]
extern "C" { fn ZSTD_versionNumber() -> u32; }

pub fn version() -> u32 { unsafe { ZSTD_versionNumber() } }

#[cfg(test)]
mod tests {
    #[test]
    fn v() { assert!(super::version() > 0); }
}
