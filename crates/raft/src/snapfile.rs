//! Snapshot image files: `snap/<group>.snap`, written to a temporary file,
//! fsynced and renamed into place so a crash leaves either the old image or
//! the new one. The image is framed with a length and a checksum so a
//! damaged file is reported at start instead of restored.

use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"KVSNAP01";

pub fn path(dir: &Path, group: u64) -> PathBuf {
    dir.join(format!("{group}.snap"))
}

fn checksum(data: &[u8]) -> u64 {
    // FNV-1a: enough to detect a damaged or truncated file.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Frames an image: magic | len u64 | checksum u64 | image.
pub fn wrap(image: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(image.len() + 24);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(image.len() as u64).to_le_bytes());
    out.extend_from_slice(&checksum(image).to_le_bytes());
    out.extend_from_slice(image);
    out
}

/// The image inside a framed file, checked.
pub fn unwrap(file: &[u8]) -> Result<&[u8], String> {
    if file.len() < 24 || &file[..8] != MAGIC {
        return Err("not a Kvasir snapshot file".into());
    }
    let mut n = [0u8; 8];
    n.copy_from_slice(&file[8..16]);
    let len = u64::from_le_bytes(n) as usize;
    let mut c = [0u8; 8];
    c.copy_from_slice(&file[16..24]);
    let image = &file[24..];
    if image.len() != len {
        return Err(format!(
            "snapshot truncated: {} of {len} bytes",
            image.len()
        ));
    }
    if checksum(image) != u64::from_le_bytes(c) {
        return Err("snapshot checksum mismatch".into());
    }
    Ok(image)
}

pub fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framed_images_detect_damage() {
        let f = wrap(b"hello image");
        assert_eq!(unwrap(&f).unwrap(), b"hello image");
        assert!(unwrap(&f[..f.len() - 1]).is_err());
        let mut bad = f.clone();
        bad[30] ^= 1;
        assert!(unwrap(&bad).unwrap_err().contains("checksum"));
    }
}
