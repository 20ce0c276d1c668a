//! Every `make` command the README and `docs/` show must work as written (issue 10:
//! `make bench CORES=1,2,4 ONLY=urpc`, shown in the README, once failed with "CORES must
//! be a number"). Each command is taken from the text, its settings checked against the
//! Makefile's, and `run`, `test`, `bench` and `bench-smoke` run as a dry run
//! (`DRY_RUN=1`: settings parsed, plan made, nothing built or booted).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The README and every file in `docs/`.
fn documents() -> Vec<(String, String)> {
    let mut files = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> =
        fs::read_dir(root().join("docs")).unwrap().map(|e| e.unwrap().path()).collect();
    docs.sort();
    files.extend(docs.into_iter().filter(|p| p.extension().is_some_and(|e| e == "md")));
    files.into_iter().map(|p| (p.display().to_string(), fs::read_to_string(&p).unwrap())).collect()
}

/// The commands a document shows: lines of fenced code blocks (joined across a trailing
/// `\`) and inline code spans that start with `make ` or `cargo xtask `.
fn commands(text: &str) -> Vec<String> {
    let is_command = |c: &str| c.starts_with("make ") || c.starts_with("cargo xtask ");
    let mut found = Vec::new();
    let mut fenced = false;
    let mut pending = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            let joined = format!("{pending}{}", line.trim());
            if let Some(head) = joined.strip_suffix('\\') {
                pending = format!("{} ", head.trim_end());
                continue;
            }
            pending.clear();
            let command = strip_comment(&joined);
            if is_command(&command) {
                found.push(command);
            }
        } else {
            for (i, span) in line.split('`').enumerate() {
                if i % 2 == 1 && is_command(span) {
                    found.push(span.trim().to_string());
                }
            }
        }
    }
    found
}

/// The command without a trailing `# comment` (a `#` after a space, outside quotes).
fn strip_comment(line: &str) -> String {
    let mut quoted = false;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted && previous.is_whitespace() => return line[..i].trim().to_string(),
            _ => {}
        }
        previous = c;
    }
    line.trim().to_string()
}

/// Shell words: split on spaces outside double quotes, the quotes removed.
fn words(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut word, mut quoted, mut started) = (String::new(), false, false);
    for c in command.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => {
                if started {
                    out.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push(word);
    }
    out
}

/// The Makefile's targets and the settings it passes on (`export ...`).
fn makefile() -> (Vec<String>, Vec<String>) {
    let text = fs::read_to_string(root().join("Makefile")).unwrap();
    let targets = text
        .lines()
        .filter_map(|l| l.split_once(':').map(|(t, _)| t))
        .filter(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        .map(String::from)
        .collect();
    let exported = text
        .lines()
        .find_map(|l| l.strip_prefix("export ").filter(|rest| !rest.contains(":=")))
        .unwrap()
        .split_whitespace()
        .map(String::from)
        .collect();
    (targets, exported)
}

/// Runs `xtask COMMAND --dry-run` with `settings` as the only settings in the environment.
fn dry_run(
    command: &str,
    args: &[String],
    settings: &BTreeMap<String, String>,
) -> Result<(), String> {
    let (_, exported) = makefile();
    let mut xtask = Command::new(env!("CARGO_BIN_EXE_xtask"));
    xtask.arg(command).args(args).arg("--dry-run");
    // make runs xtask in the repository's root, so a relative path (`DISK=docs`) is
    // relative to it, not to the folder cargo runs this test in (`xtask/`).
    xtask.current_dir(root());
    for name in &exported {
        xtask.env_remove(name);
    }
    xtask.envs(settings);
    let out = xtask.output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Checks one command; returns why it would not work as written.
fn check(command: &str) -> Result<(), String> {
    let (targets, exported) = makefile();
    let all = words(command);
    let (xtask_command, args, settings) = if all[0] == "make" {
        let mut settings = BTreeMap::new();
        let mut goals = Vec::new();
        for word in &all[1..] {
            match word.split_once('=') {
                Some((name, value)) => {
                    if !exported.contains(&name.to_string()) {
                        return Err(format!("the Makefile does not pass on `{name}`"));
                    }
                    settings.insert(name.to_string(), value.to_string());
                }
                None => goals.push(word.clone()),
            }
        }
        let goal = goals.first().cloned().unwrap_or_else(|| "help".into());
        if goals.len() > 1 || !targets.contains(&goal) {
            return Err(format!("no Makefile target `{}`", goals.join(" ")));
        }
        (goal, Vec::new(), settings)
    } else {
        // cargo xtask COMMAND ARGS...
        (all[2].clone(), all[3..].to_vec(), BTreeMap::new())
    };
    match xtask_command.as_str() {
        "run" | "test" | "bench" | "bench-smoke" => dry_run(&xtask_command, &args, &settings),
        _ => Ok(()),
    }
}

#[test]
fn every_command_in_the_readme_and_docs_works_as_written() {
    let mut checked = 0;
    let mut broken = Vec::new();
    for (file, text) in documents() {
        for command in commands(&text) {
            checked += 1;
            if let Err(why) = check(&command) {
                broken.push(format!("{file}: `{command}`: {}", why.trim()));
            }
        }
    }
    assert!(checked >= 10, "found only {checked} commands: is the extraction broken?");
    assert!(broken.is_empty(), "commands that do not work as written:\n{}", broken.join("\n"));
}

#[test]
fn commands_are_extracted_as_a_shell_would_read_them() {
    let text =
        "Run `make run CMD=\"cores\"` or:\n\n```sh\nmake bench CORES=1,2,4 ONLY=urpc  # some\n\
                make run QEMU_ARGS=\"-a b \\\n  -c d\"\nls\n```\n";
    let found = commands(text);
    assert_eq!(
        found,
        [
            "make run CMD=\"cores\"",
            "make bench CORES=1,2,4 ONLY=urpc",
            "make run QEMU_ARGS=\"-a b -c d\""
        ]
    );
    assert_eq!(words(&found[2]), ["make", "run", "QEMU_ARGS=-a b -c d"]);
    assert_eq!(strip_comment("make run CMD=\"a # b\" # c"), "make run CMD=\"a # b\"");
}

#[test]
fn a_broken_command_is_caught() {
    // A regression test of the check itself: each of these must be refused.
    assert!(check("make bench CORES=1,x").is_err());
    assert!(check("make bench ONLY=nonesuch").is_err());
    assert!(check("make run CORES=1,2").is_err());
    assert!(check("make run CORSE=2").is_err());
    assert!(check("make nonesuch").is_err());
    assert!(check("make test TEST_FILTER=nonesuch").is_err());
    assert!(check("make bench CORES=3 SOCKETS=2").is_err());
    assert!(check("make run CORES=4 SOCKETS=3").is_err());
    assert!(check("make bench CORES=1,2,4 ONLY=urpc").is_ok());
    assert!(check("make run DISK=nonesuch").is_err());
    assert!(check("make run DISK=none").is_ok());
    assert!(check("make run DISK=disk/www").is_ok());
}

/// A `curl` the docs show against `tcpsvc` (whose 128 bytes are no HTTP response) asks for
/// `--http0.9`: curl 7.66 and later refuse such a reply and print nothing, and
/// docs/net.md's `curl -s 127.0.0.1:8080 | wc -c` printed 0, not the 128 it promised.
#[test]
fn curl_against_tcpsvc_accepts_a_reply_that_is_not_http() {
    for (path, text) in documents() {
        let mut tcpsvc_near = false;
        for line in text.lines() {
            if line.contains("tcpsvc") {
                tcpsvc_near = true;
            } else if line.trim().is_empty() || line.contains("webd") {
                tcpsvc_near = false;
            }
            if tcpsvc_near && line.contains("curl ") && line.contains("| wc -c") {
                assert!(line.contains("--http0.9"), "{path}: `{}` needs --http0.9", line.trim());
            }
        }
    }
}
