//! Reading a small file from outside (a token, a key, a kubeconfig, a CA
//! bundle, the version or readiness file): [`read_bounded`], the one way
//! opstatus reads such a file.
//!
//! The file must be a regular file (symbolic links are followed: Kubernetes
//! mounts Secrets, ConfigMaps and the service-account token through
//! `..data/` links), it is opened without blocking, so a FIFO never stalls
//! the loop, and at most its kind's limit is read, so `/dev/zero` or a huge
//! file never fills memory. Every error names the file and what it is for,
//! never its contents.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// A bound service-account token is ~1 KB; an OIDC token a few KB.
pub(crate) const TOKEN_LIMIT: u64 = 64 * 1024;
/// A kube9 API key is a few dozen bytes.
pub(crate) const API_KEY_LIMIT: u64 = 4 * 1024;
/// A version file lists a handful of `name=version` lines.
pub(crate) const VERSION_FILE_LIMIT: u64 = 64 * 1024;
/// Kubeconfigs with inline certificates for many clusters reach ~100 KB.
pub(crate) const KUBECONFIG_LIMIT: u64 = 4 * 1024 * 1024;
/// A CA bundle: the system bundle (~150 certificates) is ~220 KB. Client
/// certificate chains use the same bound.
pub(crate) const CA_LIMIT: u64 = 1024 * 1024;
/// A private key in PEM: an RSA 16384-bit key is ~13 KB.
pub(crate) const KEY_LIMIT: u64 = 64 * 1024;
/// The readiness file holds one line of ~50 bytes; the namespace file one
/// name of at most 63.
pub(crate) const SMALL_LIMIT: u64 = 4 * 1024;

/// `O_NONBLOCK`: std has no name for it and `libc` is not a dependency.
/// Opening a FIFO for reading blocks until a writer comes; with this flag it
/// returns at once, and the file-type check below refuses it. Regular files
/// ignore the flag. The value is Linux's generic one (x86, Arm, RISC-V,
/// POWER, s390x; MIPS and SPARC differ); elsewhere the type is checked
/// before opening too (see [`read_bounded`]).
const O_NONBLOCK: i32 = if cfg!(all(
    target_os = "linux",
    not(any(target_arch = "mips", target_arch = "mips64", target_arch = "sparc", target_arch = "sparc64"))
)) {
    0o4000
} else {
    0
};

/// Why a file could not be read, in words that name the file and what it
/// is for (`token file`, `API key file`, …).
#[derive(Debug)]
pub(crate) struct FileError {
    message: String,
    not_found: bool,
}

impl FileError {
    /// True when the file does not exist (callers for which a missing file
    /// has a meaning: an optional Secret, a version file not written yet).
    pub(crate) fn is_not_found(&self) -> bool {
        self.not_found
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1024 * 1024 && b % (1024 * 1024) == 0 => format!("{} MiB", b / (1024 * 1024)),
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b / 1024),
        b => format!("{b} bytes"),
    }
}

/// Reads the regular file at `path` (links followed), at most `limit`
/// bytes, without ever blocking on it. `what` names it in errors.
pub(crate) fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, FileError> {
    let shown = path.display();
    let io_error = |error: io::Error| FileError {
        not_found: error.kind() == io::ErrorKind::NotFound,
        message: format!("cannot read {what} {shown}: {error}"),
    };
    let refuse =
        |kind| FileError { message: format!("{what} {shown} is {kind}, not a regular file"), not_found: false };
    // Checked before opening as well, where O_NONBLOCK has no known value.
    if O_NONBLOCK == 0 {
        let kind = std::fs::metadata(path).map_err(io_error)?.file_type();
        if !kind.is_file() {
            return Err(refuse(describe(kind)));
        }
    }
    let file: File = OpenOptions::new().read(true).custom_flags(O_NONBLOCK).open(path).map_err(io_error)?;
    // The type of what was opened, not of what the path named a moment ago.
    let metadata = file.metadata().map_err(io_error)?;
    let kind = metadata.file_type();
    if !kind.is_file() {
        return Err(refuse(describe(kind)));
    }
    // Room for the whole file and the byte that would be one too many: one
    // read brings it all and the next finds its end (an empty Vec grows
    // from 32 bytes, a read per step: the token file took seven).
    let mut data = Vec::with_capacity(metadata.len().min(limit) as usize + 1);
    file.take(limit + 1).read_to_end(&mut data).map_err(io_error)?;
    if data.len() as u64 > limit {
        let message = format!("{what} {shown} is larger than {} (the limit for a {what})", human(limit));
        return Err(FileError { message, not_found: false });
    }
    Ok(data)
}

fn describe(kind: std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    struct Dir(PathBuf);

    impl Dir {
        fn new(label: &str) -> Dir {
            let dir = std::env::temp_dir().join(format!("opstatus-files-{label}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn reads_a_regular_file_up_to_the_limit_and_names_one_over_it() {
        let dir = Dir::new("limit");
        let path = dir.0.join("token");
        std::fs::write(&path, vec![b'a'; 4096]).unwrap();
        assert_eq!(read_bounded(&path, 4096, "token file").unwrap().len(), 4096);
        let e = read_bounded(&path, 4095, "token file").unwrap_err();
        assert!(e.to_string().contains("is larger than 4095 bytes"), "{e}");
        let e = read_bounded(&path, 1024, "token file").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("token file {} is larger than 1 KiB (the limit for a token file)", path.display())
        );
    }

    #[test]
    fn follows_the_links_kubernetes_mounts_secrets_through() {
        // A mounted Secret: key -> ..data/key, ..data -> ..2025_timestamp/
        let dir = Dir::new("links");
        std::fs::create_dir(dir.0.join("..2025_01_01")).unwrap();
        std::fs::write(dir.0.join("..2025_01_01/api-key"), "kdy_test_1").unwrap();
        std::os::unix::fs::symlink("..2025_01_01", dir.0.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/api-key", dir.0.join("api-key")).unwrap();
        assert_eq!(read_bounded(&dir.0.join("api-key"), API_KEY_LIMIT, "API key file").unwrap(), b"kdy_test_1");
    }

    #[test]
    fn refuses_devices_directories_and_fifos_without_blocking() {
        let dir = Dir::new("special");
        let e = read_bounded(Path::new("/dev/zero"), TOKEN_LIMIT, "token file").unwrap_err();
        assert_eq!(e.to_string(), "token file /dev/zero is a character device, not a regular file");
        let e = read_bounded(&dir.0, TOKEN_LIMIT, "token file").unwrap_err();
        assert!(e.to_string().ends_with("is a directory, not a regular file"), "{e}");
        // A link to a device is what a planted file would be.
        std::os::unix::fs::symlink("/dev/zero", dir.0.join("zero")).unwrap();
        let e = read_bounded(&dir.0.join("zero"), 10, "x").unwrap_err();
        assert!(e.to_string().ends_with("is a character device, not a regular file"), "{e}");

        let fifo = dir.0.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(made.success());
        let start = Instant::now();
        let e = read_bounded(&fifo, API_KEY_LIMIT, "API key file").unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(5), "a FIFO with no writer must not block");
        assert_eq!(e.to_string(), format!("API key file {} is a FIFO, not a regular file", fifo.display()));
    }

    #[test]
    fn a_missing_file_is_told_apart() {
        let e = read_bounded(Path::new("/nonexistent/key"), 10, "API key file").unwrap_err();
        assert!(e.is_not_found());
        assert!(e.to_string().starts_with("cannot read API key file /nonexistent/key: "), "{e}");
        assert!(!read_bounded(Path::new("/dev/zero"), 10, "x").unwrap_err().is_not_found());
    }
}
