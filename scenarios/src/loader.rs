//! Loads a corpus: a scenario file, or a folder of them, with its worlds and
//! taxonomy.
//!
//! Guarantees:
//! - A folder that holds `corpus/` is a project-style folder (e.g.
//!   `scenarios/`): its scenario files are `corpus/*.yaml`. Any other folder's
//!   scenario files are its own `*.yaml` files (except `taxonomy.yaml`). A
//!   file is read alone. Files are read in name order.
//! - A world named `w` is `<corpus folder>/worlds/w.yaml` if that exists,
//!   else `<project>/worlds/w.yaml`; the taxonomy is
//!   `<corpus folder>/taxonomy.yaml` if that exists, else the project's.
//! - Every refusal is a [`LoadError`] naming the file, the scenario id and the
//!   key or value (and a line where one can be found). A refused scenario is
//!   dropped; nothing else is: a bad file next to a good one loses nothing of
//!   the good one, and a bad scenario loses nothing of its neighbours.
//! - Refused: unknown keys, unknown verbs, steps with zero or two verbs,
//!   dangling step references, unknown taxonomy classes, unknown reason
//!   codes, duplicate scenario ids (the later one), unknown or broken worlds,
//!   non-kebab-case ids, bad base64, a clock moved or set beyond ±10
//!   years of the world's `now` ([`crate::clock`]), and an attack that
//!   carries no check its success would break (no step expected `deny` or
//!   `step_up` and no money invariant: [`Scenario::missing_check`]), named
//!   with what is missing.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::yaml::Value;

use crate::error::{LoadError, LoadErrorKind};
use crate::ids::is_kebab;
use crate::scenario::{Label, Scenario};
use crate::taxonomy::Taxonomy;
use crate::world::World;

/// Where the project's own worlds and taxonomy live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// The project's `scenarios/` folder.
    pub project_dir: PathBuf,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            project_dir: project_dir(),
        }
    }
}

/// The project's `scenarios/` folder (this crate's manifest folder).
pub fn project_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where a scenario was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub file: PathBuf,
    pub line: Option<usize>,
}

/// A loaded corpus, with the refusals kept beside what loaded.
#[derive(Debug, Clone, Default)]
pub struct Corpus {
    /// The corpus folder (a file's parent folder).
    pub root: PathBuf,
    /// The scenario files read, in order.
    pub files: Vec<PathBuf>,
    /// Every scenario that loaded, in file order.
    pub scenarios: Vec<Scenario>,
    /// Where each loaded scenario came from, by id.
    pub origins: BTreeMap<String, Origin>,
    /// Every world a loaded scenario uses, by name.
    pub worlds: BTreeMap<String, World>,
    pub taxonomy: Taxonomy,
    /// Every refusal, in the order met.
    pub errors: Vec<LoadError>,
}

/// Loads a corpus and refuses it whole if anything was refused.
pub fn load_corpus(path: impl AsRef<Path>) -> Result<Corpus, Vec<LoadError>> {
    let corpus = Corpus::load(path);
    if corpus.errors.is_empty() {
        Ok(corpus)
    } else {
        Err(corpus.errors)
    }
}

impl Corpus {
    /// Loads what can be loaded from `path`, keeping every refusal in
    /// `errors`.
    pub fn load(path: impl AsRef<Path>) -> Corpus {
        Corpus::load_with(path, &LoadOptions::default())
    }

    /// As [`Corpus::load`], with the project folder given.
    pub fn load_with(path: impl AsRef<Path>, options: &LoadOptions) -> Corpus {
        let path = path.as_ref();
        let mut corpus = Corpus::default();
        let (root, files) = match scenario_files(path) {
            Ok(found) => found,
            Err(message) => {
                corpus.errors.push(LoadError {
                    file: path.to_path_buf(),
                    line: None,
                    scenario: None,
                    kind: LoadErrorKind::Io { message },
                });
                return corpus;
            }
        };
        corpus.root = root.clone();
        corpus.files = files.clone();
        let mut loader = Loader {
            root,
            project: options.project_dir.clone(),
            worlds: BTreeMap::new(),
            corpus,
        };
        loader.load_taxonomy();
        for file in &files {
            loader.load_file(file);
        }
        let Loader {
            worlds, mut corpus, ..
        } = loader;
        corpus.worlds = worlds
            .into_iter()
            .filter_map(|(name, w)| w.map(|w| (name, w)))
            .filter(|(name, _)| corpus.scenarios.iter().any(|s| &s.world == name))
            .collect();
        corpus
    }

    /// The loaded attacks.
    pub fn attacks(&self) -> impl Iterator<Item = &Scenario> {
        self.scenarios.iter().filter(|s| s.label == Label::Attack)
    }

    /// The loaded legitimate scenarios.
    pub fn legit(&self) -> impl Iterator<Item = &Scenario> {
        self.scenarios.iter().filter(|s| s.label == Label::Legit)
    }

    /// The scenario with this id.
    pub fn get(&self, id: &str) -> Option<&Scenario> {
        self.scenarios.iter().find(|s| s.id == id)
    }

    /// Number of attacks per taxonomy class (classes with none included).
    pub fn attacks_per_class(&self) -> BTreeMap<String, usize> {
        let mut counts: BTreeMap<String, usize> = self
            .taxonomy
            .classes
            .iter()
            .map(|c| (c.id.clone(), 0))
            .collect();
        for s in self.attacks() {
            if let Some(c) = &s.class {
                *counts.entry(c.clone()).or_default() += 1;
            }
        }
        counts
    }
}

/// The corpus folder and its scenario files, or why they cannot be listed.
fn scenario_files(path: &Path) -> Result<(PathBuf, Vec<PathBuf>), String> {
    if path.is_file() {
        let root = path.parent().map(Path::to_path_buf).unwrap_or_default();
        return Ok((root, vec![path.to_path_buf()]));
    }
    if !path.is_dir() {
        return Err("no such file or folder".into());
    }
    let corpus_dir = path.join("corpus");
    let dir = if corpus_dir.is_dir() {
        corpus_dir
    } else {
        path.to_path_buf()
    };
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .map_err(|e| e.to_string())?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
        .filter(|p| p.file_name().and_then(|n| n.to_str()) != Some("taxonomy.yaml"))
        .collect();
    files.sort();
    Ok((path.to_path_buf(), files))
}

struct Loader {
    root: PathBuf,
    project: PathBuf,
    /// `None`: the world was found but did not load.
    worlds: BTreeMap<String, Option<World>>,
    corpus: Corpus,
}

impl Loader {
    fn error(
        &mut self,
        file: &Path,
        line: Option<usize>,
        scenario: Option<String>,
        kind: LoadErrorKind,
    ) {
        self.corpus.errors.push(LoadError {
            file: file.to_path_buf(),
            line,
            scenario,
            kind,
        });
    }

    fn first_existing(&self, relative: &str) -> (Option<PathBuf>, Vec<PathBuf>) {
        let candidates = vec![self.root.join(relative), self.project.join(relative)];
        let found = candidates.iter().find(|p| p.is_file()).cloned();
        (found, candidates)
    }

    fn load_taxonomy(&mut self) {
        let (found, searched) = self.first_existing("taxonomy.yaml");
        let Some(file) = found else {
            let kind = LoadErrorKind::Invalid {
                message: "no taxonomy.yaml found".into(),
            };
            self.error(&searched[0], None, None, kind);
            return;
        };
        match fs::read_to_string(&file) {
            Err(e) => self.error(
                &file,
                None,
                None,
                LoadErrorKind::Io {
                    message: e.to_string(),
                },
            ),
            Ok(text) => match Taxonomy::from_yaml(&text) {
                Ok(t) => self.corpus.taxonomy = t,
                Err(problems) => {
                    for message in problems {
                        self.error(&file, None, None, LoadErrorKind::Invalid { message });
                    }
                }
            },
        }
    }

    /// Loads world `name` once; `Err` carries the refusal for a scenario.
    fn world(&mut self, name: &str) -> Result<(), LoadErrorKind> {
        if let Some(w) = self.worlds.get(name) {
            return match w {
                Some(_) => Ok(()),
                None => Err(LoadErrorKind::BrokenWorld { world: name.into() }),
            };
        }
        let (found, searched) = self.first_existing(&format!("worlds/{name}.yaml"));
        let file = match found {
            Some(f) if is_kebab(name) => f,
            _ => {
                return Err(LoadErrorKind::UnknownWorld {
                    world: name.into(),
                    searched,
                });
            }
        };
        let loaded = fs::read_to_string(&file)
            .map_err(|e| LoadErrorKind::Io {
                message: e.to_string(),
            })
            .and_then(|text| {
                crate::yaml::from_str::<World>(&text)
                    .map_err(|e| crate::yaml::classify(&e.to_string(), ""))
            });
        match loaded {
            Ok(world) => {
                let problems = world.check();
                let ok = problems.is_empty();
                for message in problems {
                    self.error(&file, None, None, LoadErrorKind::Invalid { message });
                }
                self.worlds.insert(name.into(), ok.then_some(world));
            }
            Err(kind) => {
                self.error(&file, None, None, kind);
                self.worlds.insert(name.into(), None);
            }
        }
        self.world(name)
    }

    fn load_file(&mut self, file: &Path) {
        let text = match fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => {
                return self.error(
                    file,
                    None,
                    None,
                    LoadErrorKind::Io {
                        message: e.to_string(),
                    },
                );
            }
        };
        let value: Value = match crate::yaml::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                let line = e.location().map(|l| l.line());
                return self.error(
                    file,
                    line,
                    None,
                    LoadErrorKind::Syntax {
                        message: e.to_string(),
                    },
                );
            }
        };
        let items = match value {
            Value::Sequence(items) => items,
            Value::Null => Vec::new(),
            _ => {
                let kind = LoadErrorKind::Shape {
                    path: String::new(),
                    expected: "a YAML list of scenarios".into(),
                };
                return self.error(file, Some(1), None, kind);
            }
        };
        let starts = item_start_lines(&text);
        for (k, item) in items.iter().enumerate() {
            let start = starts.get(k).copied();
            let end = starts.get(k + 1).copied();
            let id = Scenario::peek_id(item);
            let scenario = match Scenario::parse(item) {
                Ok(s) => s,
                Err(e) => {
                    let line = refine_line(&text, start, end, &e.0);
                    self.error(file, line, id, e.0);
                    continue;
                }
            };
            if let Some(first) = self.corpus.origins.get(&scenario.id) {
                let kind = LoadErrorKind::DuplicateId {
                    id: scenario.id.clone(),
                    first_file: first.file.clone(),
                };
                self.error(file, start, id, kind);
                continue;
            }
            if let Some(class) = &scenario.class {
                let known = self.corpus.taxonomy.contains(class);
                if !known && !self.corpus.taxonomy.classes.is_empty() {
                    let kind = LoadErrorKind::UnknownClass {
                        class: class.clone(),
                    };
                    let line = refine_line(&text, start, end, &kind);
                    self.error(file, line, id, kind);
                    continue;
                }
            }
            if let Err(kind) = self.world(&scenario.world) {
                let line = refine_line(&text, start, end, &kind);
                self.error(file, line, id, kind);
                continue;
            }
            let now = self
                .worlds
                .get(&scenario.world)
                .and_then(|w| w.as_ref())
                .map(|w| w.now);
            if let Some(Err(e)) = now.map(|now| crate::clock::check(&scenario.steps, now)) {
                let line = refine_line(&text, start, end, &e.0);
                self.error(file, line, id, e.0);
                continue;
            }
            if let Some(missing) = scenario.missing_check() {
                self.error(
                    file,
                    start,
                    id,
                    LoadErrorKind::AttackWithoutCheck { missing },
                );
                continue;
            }
            self.corpus.origins.insert(
                scenario.id.clone(),
                Origin {
                    file: file.to_path_buf(),
                    line: start,
                },
            );
            self.corpus.scenarios.push(scenario);
        }
    }
}

/// 1-based lines where each top-level list item starts (`- ` at column 0).
fn item_start_lines(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| *l == "-" || l.starts_with("- "))
        .map(|(i, _)| i + 1)
        .collect()
}

/// The first line between `start` and `end` that mentions the error's key or
/// value; else `start`.
fn refine_line(
    text: &str,
    start: Option<usize>,
    end: Option<usize>,
    kind: &LoadErrorKind,
) -> Option<usize> {
    let start = start?;
    let Some(subject) = kind.subject() else {
        return Some(start);
    };
    let needle_key = format!("{subject}:");
    let hit = text
        .lines()
        .enumerate()
        .skip(start - 1)
        .take_while(|(i, _)| end.is_none_or(|e| i + 1 < e))
        .find(|(_, l)| match kind {
            LoadErrorKind::UnknownKey { .. } | LoadErrorKind::MissingKey { .. } => {
                l.contains(&needle_key)
            }
            _ => l.contains(subject),
        });
    Some(hit.map(|(i, _)| i + 1).unwrap_or(start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_starts_and_refined_lines() {
        let text = "# c\n- id: a\n  steps:\n    - {propose: {actr: x}}\n- id: b\n";
        assert_eq!(item_start_lines(text), vec![2, 5]);
        let kind = LoadErrorKind::UnknownKey {
            path: "steps[0].propose".into(),
            key: "actr".into(),
        };
        assert_eq!(refine_line(text, Some(2), Some(5), &kind), Some(4));
        let kind = LoadErrorKind::Invalid {
            message: "x".into(),
        };
        assert_eq!(refine_line(text, Some(5), None, &kind), Some(5));
    }
}
