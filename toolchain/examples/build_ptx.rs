fn main() {
    let pkg = std::env::args().nth(1).unwrap_or("mage-common".into());
    match mage_toolchain::build_ptx(&pkg) {
        Ok(p) => println!("{}", p.display()),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1)
        }
    }
}
