//! `cargo xtask wheel`: the Python package `mage` as an abi3 wheel in
//! `dist/`: the package's `.py` files and the release extension
//! `mage/_C.abi3.so` (every op's PTX inside it), with `METADATA`, `WHEEL`
//! and `RECORD`, in a zip written here (stored, not compressed: no zip
//! library is needed). `pip install dist/mage-*.whl` then needs only
//! the CUDA driver, and torch for the PyTorch ops.
//!
//! The tag is `cp39-abi3-linux_x86_64`: the stable ABI from Python 3.9
//! on, and a Linux platform tag that claims no manylinux audit.

use std::path::{Path, PathBuf};

pub const TAG: &str = "cp39-abi3-linux_x86_64";

/// Builds the release extension and writes the wheel into `out`; returns
/// its path.
pub fn wheel(out: &Path) -> Result<PathBuf, String> {
    let root = mage_common::home::workspace_root();
    let ext_dir = mage_toolchain::build_python_extension(true)?;
    let ext = ext_dir.join(mage_toolchain::EXTENSION_FILE);
    let out = if out.is_absolute() { out.to_path_buf() } else { root.join(out) };
    let so = std::fs::read(&ext).map_err(|e| format!("{}: {e}", ext.display()))?;
    let mut files = package_files(&root.join("python/mage"))?;
    files.push(("mage/_C.abi3.so".to_string(), so));
    let path = write_wheel(&out, env!("CARGO_PKG_VERSION"), files)?;
    say!("{}", path.display());
    Ok(path)
}

/// Every `.py` file of the package folder, as `mage/<name>`, sorted.
fn package_files(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut files = vec![];
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.extension().is_some_and(|e| e == "py") {
            let name = path.file_name().expect("a file").to_string_lossy().into_owned();
            files.push((format!("mage/{name}"), std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?));
        }
    }
    files.sort();
    if !files.iter().any(|(n, _)| n == "mage/__init__.py") {
        return Err(format!("{} holds no __init__.py", dir.display()));
    }
    Ok(files)
}

/// Writes `mage-{version}-{TAG}.whl` into `out` with `files` (paths inside
/// the wheel and their bytes) and the dist-info; returns its path.
pub fn write_wheel(out: &Path, version: &str, mut files: Vec<(String, Vec<u8>)>) -> Result<PathBuf, String> {
    let info = format!("mage-{version}.dist-info");
    let metadata = format!(
        "Metadata-Version: 2.1\nName: mage\nVersion: {version}\nSummary: Mage's GPU kernels (Rust, PTX inside) as PyTorch ops, and their registry\nRequires-Python: >=3.9\nProvides-Extra: torch\nRequires-Dist: torch; extra == \"torch\"\n"
    );
    let wheel = format!("Wheel-Version: 1.0\nGenerator: cargo xtask wheel\nRoot-Is-Purelib: false\nTag: {TAG}\n");
    files.push((format!("{info}/METADATA"), metadata.into_bytes()));
    files.push((format!("{info}/WHEEL"), wheel.into_bytes()));
    let mut record = String::new();
    for (name, bytes) in &files {
        record.push_str(&format!("{name},sha256={},{}\n", urlsafe_b64(&sha256(bytes)), bytes.len()));
    }
    record.push_str(&format!("{info}/RECORD,,\n"));
    files.push((format!("{info}/RECORD"), record.into_bytes()));
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let path = out.join(format!("mage-{version}-{TAG}.whl"));
    let tmp = path.with_extension("whl.part");
    std::fs::write(&tmp, zip_stored(&files)?).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

fn sha256(bytes: &[u8]) -> Vec<u8> {
    let hex = mage_common::fixtures::sha256_hex(bytes);
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex")).collect()
}

/// Base64 with the URL-safe alphabet and no padding (a wheel's RECORD).
fn urlsafe_b64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut s = String::new();
    for c in bytes.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..=c.len() {
            s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    s
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut table = [0u32; 256];
    for (i, t) in table.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
        }
        *t = c;
    }
    !bytes.iter().fold(!0u32, |c, &b| table[((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8))
}

/// A zip archive of `files`, each stored (method 0), with a fixed
/// timestamp (1980-01-01) so that the same files make the same bytes.
fn zip_stored(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>, String> {
    let mut out: Vec<u8> = vec![];
    let mut central: Vec<u8> = vec![];
    let (time, date) = (0u16, (1 << 5) | 1u16);
    for (name, bytes) in files {
        let (crc, size, offset) = (crc32(bytes), u32::try_from(bytes.len()), u32::try_from(out.len()));
        let (Ok(size), Ok(offset)) = (size, offset) else { return Err("the wheel passes 4 GiB, past a zip without zip64".into()) };
        let name_len = u16::try_from(name.len()).map_err(|_| format!("{name}: name too long"))?;
        let common = |v: &mut Vec<u8>| {
            v.extend(20u16.to_le_bytes()); // version needed: 2.0
            v.extend(0u16.to_le_bytes()); // flags
            v.extend(0u16.to_le_bytes()); // stored
            v.extend(time.to_le_bytes());
            v.extend(date.to_le_bytes());
            v.extend(crc.to_le_bytes());
            v.extend(size.to_le_bytes());
            v.extend(size.to_le_bytes());
            v.extend(name_len.to_le_bytes());
            v.extend(0u16.to_le_bytes()); // extra length
        };
        out.extend(0x0403_4b50u32.to_le_bytes());
        common(&mut out);
        out.extend(name.as_bytes());
        out.extend(bytes);
        central.extend(0x0201_4b50u32.to_le_bytes());
        central.extend((3u16 << 8 | 20).to_le_bytes()); // made by: Unix, 2.0
        common(&mut central);
        central.extend(0u16.to_le_bytes()); // comment length
        central.extend(0u16.to_le_bytes()); // disk
        central.extend(0u16.to_le_bytes()); // internal attributes
        let mode: u32 = if name.ends_with(".so") { 0o100755 } else { 0o100644 };
        central.extend((mode << 16).to_le_bytes());
        central.extend(offset.to_le_bytes());
        central.extend(name.as_bytes());
    }
    let (cd_offset, cd_size) = (out.len() as u32, central.len() as u32);
    let count = u16::try_from(files.len()).map_err(|_| "too many files for a zip without zip64".to_string())?;
    out.extend(central);
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out.extend(count.to_le_bytes());
    out.extend(count.to_le_bytes());
    out.extend(cd_size.to_le_bytes());
    out.extend(cd_offset.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_and_base64_match_their_definitions() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(urlsafe_b64(b""), "");
        assert_eq!(urlsafe_b64(b"f"), "Zg");
        assert_eq!(urlsafe_b64(b"fo"), "Zm8");
        assert_eq!(urlsafe_b64(b"foo"), "Zm9v");
        assert_eq!(urlsafe_b64(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn a_wheel_holds_the_files_and_a_record_of_each() {
        let dir = std::env::temp_dir().join(format!("mage-wheel-test-{}", std::process::id()));
        let files = vec![("mage/__init__.py".to_string(), b"x = 1\n".to_vec()), ("mage/_C.abi3.so".to_string(), vec![0u8; 5])];
        let path = write_wheel(&dir, "0.1.0", files).unwrap();
        assert!(path.ends_with("mage-0.1.0-cp39-abi3-linux_x86_64.whl"));
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("mage/__init__.py,sha256="), "{text}");
        assert!(text.contains("mage-0.1.0.dist-info/RECORD,,"));
        assert!(text.contains("Tag: cp39-abi3-linux_x86_64"));
        assert_eq!(&bytes[bytes.len() - 22..bytes.len() - 18], &0x0605_4b50u32.to_le_bytes());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
