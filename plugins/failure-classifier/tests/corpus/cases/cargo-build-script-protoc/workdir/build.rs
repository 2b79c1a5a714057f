fn main() {
    let status = std::process::Command::new("protoc").arg("--version").status()
        .expect("failed to run protoc");
    assert!(status.success());
}
