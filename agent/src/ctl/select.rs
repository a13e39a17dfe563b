//! Which control sockets a command line selects: `--socket`, a testbed's
//! switches, standalone switches, or the one testbed running.

use std::io;
use std::path::{Path, PathBuf};

use lcmp_control::paths::{sockets_in, SWITCH_RUN_DIR, TESTBED_RUN_DIR};

use super::CtlError;

/// One switch to talk to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Its name as shown in output (the socket's file stem for `--socket`:
    /// sockets are named `<switch>.sock`).
    pub name: String,
    /// Its control socket.
    pub path: PathBuf,
}

/// Which switches a command line selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// `--socket PATH`.
    Socket(PathBuf),
    /// `--testbed NAME [-s SWITCH]...`: the named switches, or all when none
    /// is named.
    Testbed {
        /// The testbed.
        name: String,
        /// Switches named with `-s`.
        switches: Vec<String>,
    },
    /// `-s SWITCH...` without `--testbed`: standalone switches, or the one
    /// running testbed's for names with no standalone socket.
    Standalone(Vec<String>),
    /// Nothing given: the one running testbed, if there is exactly one.
    Auto,
}

impl Selection {
    /// The selection the options describe; `socket` excludes the others.
    pub fn from_options(
        testbed: Option<String>,
        switches: Vec<String>,
        socket: Option<PathBuf>,
    ) -> Result<Selection, CtlError> {
        for name in testbed.iter().chain(&switches) {
            check_name(name)?;
        }
        match (socket, testbed) {
            (Some(_), Some(_)) => Err(CtlError::Usage(
                "--socket addresses one socket; it cannot be combined with --testbed".into(),
            )),
            (Some(_), None) if !switches.is_empty() => Err(CtlError::Usage(
                "--socket addresses one socket; it cannot be combined with -s".into(),
            )),
            (Some(path), None) => Ok(Selection::Socket(path)),
            (None, Some(name)) => Ok(Selection::Testbed { name, switches }),
            (None, None) if switches.is_empty() => Ok(Selection::Auto),
            (None, None) => Ok(Selection::Standalone(switches)),
        }
    }
}

/// A testbed or switch name becomes a path component: refuse anything that
/// would leave the run directory or name nothing.
fn check_name(name: &str) -> Result<(), CtlError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(CtlError::Usage(format!(
            "{name:?} is not a testbed or switch name"
        )));
    }
    Ok(())
}

/// Where sockets live (the defaults of `lcmp_control::paths`; tests point
/// them at temporary directories).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDirs {
    /// One subdirectory per testbed, holding `<switch>.sock`.
    pub testbeds: PathBuf,
    /// Standalone switches' `<switch>.sock`.
    pub standalone: PathBuf,
}

impl Default for RunDirs {
    fn default() -> Self {
        RunDirs {
            testbeds: PathBuf::from(TESTBED_RUN_DIR),
            standalone: PathBuf::from(SWITCH_RUN_DIR),
        }
    }
}

/// What a selection resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The sockets, in the order they will be shown.
    pub targets: Vec<Target>,
    /// A line for stderr when the selection was read as more than it says
    /// (`-s` names found in the running testbed, not standalone).
    pub note: Option<String>,
}

impl Resolved {
    fn plain(targets: Vec<Target>) -> Resolved {
        Resolved {
            targets,
            note: None,
        }
    }
}

/// The sockets a selection addresses.
pub fn resolve(selection: &Selection, dirs: &RunDirs) -> Result<Resolved, CtlError> {
    match selection {
        Selection::Socket(path) => Ok(Resolved::plain(vec![Target {
            name: path
                .file_stem()
                .and_then(|s| s.to_str())
                .filter(|s| !s.is_empty())
                .map_or_else(|| path.display().to_string(), str::to_string),
            path: path.clone(),
        }])),
        Selection::Standalone(names) => standalone_targets(&dedup(names), dirs),
        Selection::Testbed { name, switches } => {
            testbed_targets(name, switches, dirs).map(Resolved::plain)
        }
        Selection::Auto => match running_testbeds(dirs)?.as_slice() {
            [one] => testbed_targets(one, &[], dirs).map(Resolved::plain),
            [] => {
                let standalone = match sockets_in(&dirs.standalone) {
                    Ok(s) if !s.is_empty() => format!(
                        " (standalone switches in {}: {})",
                        dirs.standalone.display(),
                        s.into_iter().map(|(n, _)| n).collect::<Vec<_>>().join(", ")
                    ),
                    _ => String::new(),
                };
                Err(CtlError::Failed(format!(
                    "no switch selected and no testbed is running under {}{standalone}; pass --testbed NAME, -s SWITCH or --socket PATH",
                    dirs.testbeds.display()
                )))
            }
            several => Err(CtlError::Failed(format!(
                "no switch selected and several testbeds are running under {} ({}); pick one with --testbed NAME",
                dirs.testbeds.display(),
                several.join(", ")
            ))),
        },
    }
}

/// `-s` names: each standalone socket that exists, else that switch of the
/// one running testbed (testbeds put their sockets under their own
/// directory, so `-s dc1` alone would otherwise never reach a testbed's
/// dc1). With no testbed running, the standalone path stays and the call
/// names it as not answering.
fn standalone_targets(names: &[String], dirs: &RunDirs) -> Result<Resolved, CtlError> {
    let standalone = |name: &str| Target {
        name: name.to_string(),
        path: dirs.standalone.join(format!("{name}.sock")),
    };
    let missing: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| !standalone(n).path.exists())
        .collect();
    let all_standalone = || {
        Ok(Resolved::plain(
            names.iter().map(|n| standalone(n)).collect(),
        ))
    };
    if missing.is_empty() {
        return all_standalone();
    }
    let quoted = missing
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let testbed = match running_testbeds(dirs)?.as_slice() {
        [] => return all_standalone(),
        [one] => one.clone(),
        several => {
            return Err(CtlError::Failed(format!(
                "no standalone switch {quoted} in {}, and several testbeds are running under {} ({}); pick one with --testbed NAME",
                dirs.standalone.display(),
                dirs.testbeds.display(),
                several.join(", ")
            )))
        }
    };
    let dir = dirs.testbeds.join(&testbed);
    let sockets = sockets_in(&dir)
        .map_err(|e| CtlError::Failed(format!("cannot list {}: {e}", dir.display())))?;
    let targets = names
        .iter()
        .map(|name| {
            if !missing.contains(&name.as_str()) {
                return Ok(standalone(name));
            }
            match sockets.iter().find(|(n, _)| n == name) {
                Some((_, path)) => Ok(Target {
                    name: name.clone(),
                    path: path.clone(),
                }),
                None => Err(CtlError::Failed(format!(
                    "no standalone switch {name:?} in {}, and testbed {testbed:?} (the one running) has no switch {name:?} either; its switches: {}",
                    dirs.standalone.display(),
                    switch_names(&sockets)
                ))),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Resolved {
        targets,
        note: Some(format!(
            "no standalone switch {quoted} in {}: using the one running testbed, {testbed:?} (--testbed {testbed} selects it without this note)",
            dirs.standalone.display()
        )),
    })
}

/// `names` without repeats, first occurrence kept.
fn dedup(names: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in names {
        if !out.contains(n) {
            out.push(n.clone());
        }
    }
    out
}

/// The testbed directories under `dir`, sorted; none when `dir` is absent.
fn list_testbeds(dir: &Path) -> Result<Vec<String>, CtlError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(CtlError::Failed(format!(
                "cannot list {}: {e}",
                dir.display()
            )))
        }
    };
    let mut out: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    out.sort();
    Ok(out)
}

/// The testbeds with switch sockets (a directory left by a stopped
/// testbed has none), sorted.
fn running_testbeds(dirs: &RunDirs) -> Result<Vec<String>, CtlError> {
    Ok(list_testbeds(&dirs.testbeds)?
        .into_iter()
        .filter(|t| matches!(sockets_in(&dirs.testbeds.join(t)), Ok(s) if !s.is_empty()))
        .collect())
}

fn switch_names(sockets: &[(String, PathBuf)]) -> String {
    sockets
        .iter()
        .map(|(n, _)| n.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn testbed_targets(
    testbed: &str,
    switches: &[String],
    dirs: &RunDirs,
) -> Result<Vec<Target>, CtlError> {
    let dir = dirs.testbeds.join(testbed);
    if !dir.is_dir() {
        let known = list_testbeds(&dirs.testbeds)?;
        return Err(CtlError::Failed(if known.is_empty() {
            format!(
                "unknown testbed {testbed:?}: there are no testbeds under {}",
                dirs.testbeds.display()
            )
        } else {
            format!(
                "unknown testbed {testbed:?}; testbeds under {}: {}",
                dirs.testbeds.display(),
                known.join(", ")
            )
        }));
    }
    let sockets = sockets_in(&dir)
        .map_err(|e| CtlError::Failed(format!("cannot list {}: {e}", dir.display())))?;
    if sockets.is_empty() {
        return Err(CtlError::Failed(format!(
            "testbed {testbed:?} has no switch sockets in {} (is it running?)",
            dir.display()
        )));
    }
    if switches.is_empty() {
        return Ok(sockets
            .into_iter()
            .map(|(name, path)| Target { name, path })
            .collect());
    }
    dedup(switches)
        .into_iter()
        .map(|name| match sockets.iter().find(|(n, _)| *n == name) {
            Some((_, path)) => Ok(Target {
                path: path.clone(),
                name,
            }),
            None => Err(CtlError::Failed(format!(
                "testbed {testbed:?} has no switch {name:?}; its switches: {}",
                switch_names(&sockets)
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run directory tree in the temporary directory, removed on drop.
    struct TempRun(PathBuf);

    impl TempRun {
        fn new(tag: &str) -> TempRun {
            let dir =
                std::env::temp_dir().join(format!("lcmp-ctl-unit-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("testbeds")).unwrap();
            std::fs::create_dir_all(dir.join("standalone")).unwrap();
            TempRun(dir)
        }

        fn dirs(&self) -> RunDirs {
            RunDirs {
                testbeds: self.0.join("testbeds"),
                standalone: self.0.join("standalone"),
            }
        }

        /// A socket file: `sockets_in` goes by name, so a plain file will do.
        fn sock(&self, rel: &str) {
            let p = self.0.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"").unwrap();
        }
    }

    impl Drop for TempRun {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn failed(r: Result<Resolved, CtlError>) -> String {
        match r {
            Err(CtlError::Failed(m)) => m,
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    fn names(r: Result<Resolved, CtlError>) -> Vec<String> {
        r.unwrap().targets.into_iter().map(|t| t.name).collect()
    }

    #[test]
    fn selection_finds_testbed_and_standalone_sockets() {
        let run = TempRun::new("select");
        let dirs = run.dirs();
        let tb = |name: &str, sw: &[&str]| Selection::Testbed {
            name: name.into(),
            switches: sw.iter().map(|s| s.to_string()).collect(),
        };
        // Nothing running: the error says where it looked.
        let m = failed(resolve(&Selection::Auto, &dirs));
        assert!(
            m.starts_with("no switch selected and no testbed is running"),
            "{m}"
        );
        run.sock("standalone/edge.sock");
        let m = failed(resolve(&Selection::Auto, &dirs));
        assert!(
            m.contains("standalone switches in") && m.contains(": edge)"),
            "{m}"
        );

        run.sock("testbeds/alpha/dc2.sock");
        run.sock("testbeds/alpha/dc1.sock");
        run.sock("testbeds/alpha/notes.txt");
        std::fs::create_dir_all(run.0.join("testbeds/stale")).unwrap();
        // One testbed with sockets: chosen, its switches sorted.
        assert_eq!(names(resolve(&Selection::Auto, &dirs)), ["dc1", "dc2"]);
        assert_eq!(
            names(resolve(&tb("alpha", &["dc2", "dc2"]), &dirs)),
            ["dc2"]
        );
        let t = resolve(&tb("alpha", &["dc1"]), &dirs).unwrap().targets;
        assert_eq!(t[0].path, dirs.testbeds.join("alpha/dc1.sock"));

        assert_eq!(
            failed(resolve(&tb("alpha", &["dc9"]), &dirs)),
            "testbed \"alpha\" has no switch \"dc9\"; its switches: dc1, dc2"
        );
        assert_eq!(
            failed(resolve(&tb("beta", &[]), &dirs)),
            format!(
                "unknown testbed \"beta\"; testbeds under {}: alpha, stale",
                dirs.testbeds.display()
            )
        );
        assert!(failed(resolve(&tb("stale", &[]), &dirs)).contains("has no switch sockets"));

        run.sock("testbeds/gamma/dc1.sock");
        let m = failed(resolve(&Selection::Auto, &dirs));
        assert!(
            m.contains("several testbeds are running") && m.contains("(alpha, gamma)"),
            "{m}"
        );

        let t = resolve(&Selection::Standalone(vec!["edge".into()]), &dirs)
            .unwrap()
            .targets;
        assert_eq!(t[0].path, dirs.standalone.join("edge.sock"));
        let t = resolve(&Selection::Socket("/tmp/x/dc7.sock".into()), &dirs)
            .unwrap()
            .targets;
        assert_eq!(
            (t[0].name.as_str(), t[0].path.as_path()),
            ("dc7", Path::new("/tmp/x/dc7.sock"))
        );
    }

    #[test]
    fn options_combine_into_one_selection() {
        assert_eq!(
            Selection::from_options(None, vec![], None).unwrap(),
            Selection::Auto
        );
        assert_eq!(
            Selection::from_options(None, vec!["a".into()], None).unwrap(),
            Selection::Standalone(vec!["a".into()])
        );
        assert!(matches!(
            Selection::from_options(Some("t".into()), vec![], Some("/s".into())),
            Err(CtlError::Usage(_))
        ));
        assert!(matches!(
            Selection::from_options(None, vec!["a".into()], Some("/s".into())),
            Err(CtlError::Usage(_))
        ));
        assert_eq!(
            Selection::from_options(Some("../etc".into()), vec![], None),
            Err(CtlError::Usage(
                "\"../etc\" is not a testbed or switch name".into()
            ))
        );
    }

    #[test]
    fn a_switch_named_alone_is_found_in_the_one_running_testbed() {
        let run = TempRun::new("fallback");
        let dirs = run.dirs();
        let s =
            |names: &[&str]| Selection::Standalone(names.iter().map(|n| n.to_string()).collect());
        let (sa, tbs) = (dirs.standalone.display(), dirs.testbeds.display());

        // Nothing running anywhere: the standalone path, for the call to
        // report as not answering.
        assert_eq!(
            resolve(&s(&["dc1"]), &dirs).unwrap(),
            Resolved {
                targets: vec![Target {
                    name: "dc1".into(),
                    path: dirs.standalone.join("dc1.sock"),
                }],
                note: None,
            }
        );

        // One testbed running (a stopped one's empty directory aside): its
        // dc1, and a note saying so.
        run.sock("testbeds/nb/dc1.sock");
        run.sock("testbeds/nb/dc2.sock");
        std::fs::create_dir_all(run.0.join("testbeds/old")).unwrap();
        assert_eq!(
            resolve(&s(&["dc1"]), &dirs).unwrap(),
            Resolved {
                targets: vec![Target {
                    name: "dc1".into(),
                    path: dirs.testbeds.join("nb/dc1.sock"),
                }],
                note: Some(format!(
                    "no standalone switch \"dc1\" in {sa}: using the one running testbed, \"nb\" (--testbed nb selects it without this note)"
                )),
            }
        );

        // A standalone socket that exists is used; only the others fall
        // back, in the order named, and only they are in the note.
        run.sock("standalone/edge.sock");
        let r = resolve(&s(&["dc2", "edge", "dc1"]), &dirs).unwrap();
        assert_eq!(
            r.targets.iter().map(|t| t.path.clone()).collect::<Vec<_>>(),
            [
                dirs.testbeds.join("nb/dc2.sock"),
                dirs.standalone.join("edge.sock"),
                dirs.testbeds.join("nb/dc1.sock"),
            ]
        );
        assert!(
            r.note
                .as_deref()
                .unwrap()
                .starts_with(&format!("no standalone switch \"dc2\", \"dc1\" in {sa}: ")),
            "{r:?}"
        );
        assert_eq!(
            failed(resolve(&s(&["dc9"]), &dirs)),
            format!(
                "no standalone switch \"dc9\" in {sa}, and testbed \"nb\" (the one running) has no switch \"dc9\" either; its switches: dc1, dc2"
            )
        );

        // A standalone dc1 takes precedence over the testbed's.
        run.sock("standalone/dc1.sock");
        assert_eq!(
            resolve(&s(&["dc1"]), &dirs).unwrap().targets[0].path,
            dirs.standalone.join("dc1.sock")
        );

        // Two testbeds running: no guess; both listed, and how to choose.
        run.sock("testbeds/lab/dc2.sock");
        assert_eq!(
            failed(resolve(&s(&["dc2"]), &dirs)),
            format!(
                "no standalone switch \"dc2\" in {sa}, and several testbeds are running under {tbs} (lab, nb); pick one with --testbed NAME"
            )
        );
        assert_eq!(names(resolve(&s(&["edge", "dc1"]), &dirs)), ["edge", "dc1"]);
    }
}
