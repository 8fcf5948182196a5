//! Reading a file a server's configuration names (a configuration file, a
//! certificate, a key, a CA bundle), at start and on every reload, so that no
//! file can stop a server: only a regular file is read (a FIFO would block
//! the read until a writer comes, a device such as `/dev/zero` never ends),
//! and at most a bound of bytes of it.

use std::io::Read as _;
use std::path::Path;

/// The most bytes read of one file named by a configuration: 16 MiB, far
/// above any configuration, certificate chain or key.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Not a regular file (a directory, a FIFO, a device, a socket), after
    /// following links.
    #[error("not a regular file")]
    NotRegular,
    /// Larger than the bound.
    #[error("larger than the {max} bytes read")]
    TooLarge {
        /// The bound, in bytes.
        max: u64,
    },
    /// The system's error.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The bytes of the regular file `path` (links followed), at most
/// `max_bytes` of them.
///
/// # Errors
///
/// [`FileError::NotRegular`] for anything but a regular file,
/// [`FileError::TooLarge`] for one over `max_bytes` (also when it grew
/// while being read), [`FileError::Io`] when it cannot be read.
pub fn read_regular_file(path: &Path, max_bytes: u64) -> Result<Vec<u8>, FileError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    if !std::fs::metadata(path)?.is_file() {
        return Err(FileError::NotRegular);
    }
    // Opened without blocking (a FIFO swapped in after the check above would
    // otherwise hold the open until a writer came), then checked again on
    // the handle itself, which no later swap can change.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(FileError::NotRegular);
    }
    if metadata.len() > max_bytes {
        return Err(FileError::TooLarge { max: max_bytes });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(FileError::TooLarge { max: max_bytes });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_read_whole_up_to_the_bound() {
        let directory =
            std::env::temp_dir().join(format!("tollgate-serve-files-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let path = directory.join("ten");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_regular_file(&path, 10).unwrap(), b"0123456789");
        assert!(matches!(
            read_regular_file(&path, 9),
            Err(FileError::TooLarge { max: 9 })
        ));
        assert!(matches!(
            read_regular_file(&directory, 10),
            Err(FileError::NotRegular)
        ));
        assert!(matches!(
            read_regular_file(&directory.join("absent"), 10),
            Err(FileError::Io(_))
        ));
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn a_device_or_a_fifo_is_never_read() {
        // /dev/zero never ends; a FIFO's open would wait for a writer.
        assert!(matches!(
            read_regular_file(Path::new("/dev/zero"), MAX_FILE_BYTES),
            Err(FileError::NotRegular)
        ));
        let fifo = std::env::temp_dir().join(format!("tollgate-serve-fifo-{}", std::process::id()));
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo");
        assert!(matches!(
            read_regular_file(&fifo, MAX_FILE_BYTES),
            Err(FileError::NotRegular)
        ));
        std::fs::remove_file(&fifo).unwrap();
    }
}
