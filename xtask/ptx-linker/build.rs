fn main() {
    println!("cargo:rustc-env=MAGE_HOST_TRIPLE={}", std::env::var("TARGET").unwrap());
}
