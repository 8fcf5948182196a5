//! The configuration directory's tests: runtime keys, errors, ConfigMap
//! volumes, files that are not regular, and reloads.

use super::*;

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn names(files: &ConfigFiles) -> Vec<&str> {
    files.files.iter().map(|file| file.name.as_str()).collect()
}

const BASIC: &str = "domain: basic\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n";

#[test]
fn runtime_keys_are_goruntime_keys() {
    let root = tempfile::tempdir().unwrap();
    write(&root.path().join("rl/config/basic.yaml"), BASIC);
    write(
        &root.path().join("rl/config/nested/other.yaml"),
        "domain: other\n",
    );
    write(&root.path().join("rl/config/.hidden"), "domain: hidden\n");
    write(&root.path().join("rl/elsewhere/x.yaml"), "domain: x\n");
    let options = LoaderOptions::default();
    let source = ConfigSource::runtime(root.path(), "rl", "config", false, true, options);
    let files = source.read().unwrap();
    assert_eq!(
        names(&files),
        [
            "config..hidden",
            "config.basic.yaml",
            "config.nested.other.yaml"
        ]
    );
    let ignoring = ConfigSource::runtime(root.path(), "rl", "config", true, true, options);
    assert_eq!(
        names(&ignoring.read().unwrap()),
        ["config.basic.yaml", "config.nested.other.yaml"]
    );
    let unwatched = ConfigSource::runtime(root.path(), "rl", "config", true, false, options);
    assert_eq!(
        names(&unwatched.read().unwrap()),
        ["basic.yaml", "nested.other.yaml"]
    );
    let nothing = ConfigSource::runtime(root.path(), "", "config", false, true, options);
    assert!(nothing.read().unwrap().files.is_empty());
}

#[test]
fn errors_name_the_runtime_key() {
    let root = tempfile::tempdir().unwrap();
    write(&root.path().join("config/bad.yaml"), "domain: \"\"\n");
    let source = ConfigSource::directory(&root.path().join("config"), LoaderOptions::default());
    let error = source.read_and_load().unwrap_err().to_string();
    assert_eq!(
        error,
        "config.bad.yaml: config file cannot have empty domain"
    );
    let missing = ConfigSource::directory(&root.path().join("absent"), LoaderOptions::default());
    assert!(matches!(
        missing.read(),
        Err(ConfigDirError::Directory { .. })
    ));
}

#[cfg(unix)]
#[test]
fn a_fifo_or_a_device_is_skipped_and_named_not_read() {
    let root = tempfile::tempdir().unwrap();
    write(&root.path().join("config/basic.yaml"), BASIC);
    let fifo = root.path().join("config/pipe.yaml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo");
    std::os::unix::fs::symlink("/dev/zero", root.path().join("config/zero.yaml")).unwrap();
    let source = ConfigSource::directory(&root.path().join("config"), LoaderOptions::default());
    // Before, the FIFO's read waited for a writer: this never returned.
    let files = source.read().unwrap();
    assert_eq!(names(&files), ["config.basic.yaml"]);
    assert_eq!(
        files.skipped,
        [
            format!("{}: not a regular file", fifo.display()),
            format!(
                "{}: not a regular file",
                root.path().join("config/zero.yaml").display()
            ),
        ]
    );
}

#[cfg(unix)]
#[test]
fn a_config_map_volume_is_read_once() {
    use std::os::unix::fs::symlink;
    let volume = tempfile::tempdir().unwrap();
    write(&volume.path().join("..2024_01/basic.yaml"), BASIC);
    symlink("..2024_01", volume.path().join("..data")).unwrap();
    symlink("..data/basic.yaml", volume.path().join("basic.yaml")).unwrap();
    let source = ConfigSource::directory(volume.path(), LoaderOptions::default());
    let files = source.read().unwrap();
    assert_eq!(names(&files), ["config.basic.yaml"]);
    assert_eq!(files.files[0].content, BASIC);
    assert!(source.load(&files).is_ok());
    // A link to a directory is not followed (goruntime walks with lstat).
    let root = tempfile::tempdir().unwrap();
    write(&root.path().join("rl/config/a.yaml"), BASIC);
    write(&root.path().join("other/b.yaml"), BASIC);
    symlink(
        root.path().join("other"),
        root.path().join("rl/config/linked"),
    )
    .unwrap();
    let linked = ConfigSource::runtime(
        root.path(),
        "rl",
        "config",
        false,
        true,
        LoaderOptions::default(),
    );
    let read = linked.read().unwrap();
    assert_eq!(names(&read), ["config.a.yaml"]);
    assert_eq!(read.skipped.len(), 1, "{:?}", read.skipped);
}

#[derive(Default)]
struct Recorded {
    domains: parking_lot::Mutex<Vec<Vec<String>>>,
    failures: AtomicU64,
}

impl ReloadTarget for Recorded {
    fn reloaded(&self, config: RateLimitConfig) {
        let mut domains: Vec<String> = config.domains().map(str::to_owned).collect();
        domains.sort();
        self.domains.lock().push(domains);
    }

    fn reload_failed(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }
}

async fn until(condition: impl Fn() -> bool) {
    tokio::time::timeout(Duration::from_secs(5), async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn changes_reload_and_bad_files_keep_the_config() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("basic.yaml");
    write(&path, BASIC);
    let source = ConfigSource::directory(directory.path(), LoaderOptions::default());
    let (_, files) = source.read_and_load().unwrap();
    let counters = Arc::new(ReloadCounters::default());
    let target = Arc::new(Recorded::default());
    let task = watch(
        source,
        Duration::from_millis(20),
        files,
        Arc::clone(&counters),
        target.clone(),
    );
    write(&path, "domain: \"\"\n");
    until(|| counters.errors() == 1).await;
    assert_eq!(target.failures.load(Ordering::Relaxed), 1);
    write(&path, &BASIC.replace("basic", "renamed"));
    until(|| counters.successes() == 1).await;
    assert_eq!(*target.domains.lock(), [["renamed"]]);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!((counters.successes(), counters.errors()), (1, 1));
    task.abort();
}

#[cfg(unix)]
#[tokio::test]
async fn a_config_map_swap_reloads() {
    use std::os::unix::fs::symlink;
    let volume = tempfile::tempdir().unwrap();
    write(&volume.path().join("..v1/basic.yaml"), BASIC);
    symlink("..v1", volume.path().join("..data")).unwrap();
    symlink("..data/basic.yaml", volume.path().join("basic.yaml")).unwrap();
    let source = ConfigSource::directory(volume.path(), LoaderOptions::default());
    let (_, files) = source.read_and_load().unwrap();
    let counters = Arc::new(ReloadCounters::default());
    let target = Arc::new(Recorded::default());
    let task = watch(
        source,
        Duration::from_millis(20),
        files,
        Arc::clone(&counters),
        target.clone(),
    );
    // The kubelet's swap: a new directory, a new link renamed over `..data`.
    write(
        &volume.path().join("..v2/basic.yaml"),
        &BASIC.replace("basic", "second"),
    );
    symlink("..v2", volume.path().join("..data_tmp")).unwrap();
    fs::rename(
        volume.path().join("..data_tmp"),
        volume.path().join("..data"),
    )
    .unwrap();
    fs::remove_dir_all(volume.path().join("..v1")).unwrap();
    until(|| counters.successes() == 1).await;
    assert_eq!(*target.domains.lock(), [["second"]]);
    task.abort();
}
