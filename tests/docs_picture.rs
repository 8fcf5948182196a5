//! The picture in docs/SIMULATE.md and the README
//! (`docs/images/simulate-algorithms.svg`) is what the command printed
//! beside it makes now: the command is read from SIMULATE.md's first shell
//! block, run with its `--output` moved to a scratch file, and the two
//! pictures must be the same bytes. A change to the engine, the patterns or
//! the drawing that changes the picture fails here until it is made again.

use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn the_documented_picture_is_what_its_command_makes() {
    let guide = std::fs::read_to_string(Path::new(ROOT).join("docs/SIMULATE.md")).unwrap();
    // The lines of `cargo run --release -- simulate \` ... up to the first
    // that does not continue.
    let mut command = String::new();
    for line in guide
        .lines()
        .skip_while(|line| !line.starts_with("cargo run --release -- simulate"))
    {
        command.push_str(line.trim_end_matches('\\'));
        command.push(' ');
        if !line.ends_with('\\') {
            break;
        }
    }
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(
        &words[..4],
        ["cargo", "run", "--release", "--"],
        "{command}"
    );
    let output_at = words.iter().position(|word| *word == "--output").unwrap();
    let committed = words[output_at + 1];
    assert_eq!(committed, "docs/images/simulate-algorithms.svg");
    let scratch = tempfile::tempdir().unwrap();
    let made = scratch.path().join("made.svg");
    let mut arguments: Vec<String> = words[4..].iter().map(|word| (*word).to_owned()).collect();
    arguments[output_at - 3] = made.display().to_string();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(&arguments)
        .status()
        .unwrap();
    assert!(status.success(), "{arguments:?}");
    let made = std::fs::read_to_string(&made).unwrap();
    let kept = std::fs::read_to_string(Path::new(ROOT).join(committed)).unwrap();
    assert!(
        made == kept,
        "docs/images/simulate-algorithms.svg is not what `{}` makes now: run it again",
        command.trim()
    );
}
