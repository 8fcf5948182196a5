//! Reading the CA file a `rediss://` store's certificate must chain to: a
//! regular file of at most 16 MiB holding at least one PEM certificate. The
//! rule is tollgate-serve's `read_regular_file` (which this crate sits
//! below): a device or a FIFO is refused, never read.

/// The most bytes read of a CA file: 16 MiB.
const MAX_CA_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The PEM text of the CA file `path`, checked to hold at least one
/// certificate.
///
/// # Errors
///
/// `the CA file PATH: REASON`, for `RedisStoreError::CaFile`.
pub(crate) fn read_ca_file(path: &std::path::Path) -> Result<Vec<u8>, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let error = |reason: String| format!("the CA file {}: {reason}", path.display());
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let unreadable = |source: std::io::Error| error(format!("cannot read it: {source}"));
    if !std::fs::metadata(path).map_err(unreadable)?.is_file() {
        return Err(error("not a regular file".to_owned()));
    }
    // Opened without blocking, then checked on the handle: a FIFO swapped
    // in after the check above neither holds the open nor gets read.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(unreadable)?;
    if !file.metadata().map_err(unreadable)?.is_file() {
        return Err(error("not a regular file".to_owned()));
    }
    let mut pem = Vec::new();
    file.take(MAX_CA_FILE_BYTES + 1)
        .read_to_end(&mut pem)
        .map_err(unreadable)?;
    if pem.len() as u64 > MAX_CA_FILE_BYTES {
        return Err(error(format!(
            "larger than the {MAX_CA_FILE_BYTES} bytes read"
        )));
    }
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| error(source.to_string()))?;
    if certificates.is_empty() {
        return Err(error("no PEM certificate in the file".to_owned()));
    }
    Ok(pem)
}
