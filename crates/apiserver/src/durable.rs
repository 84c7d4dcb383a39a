//! Durable persistence under the store: one redb database file.
//!
//! Why redb: it is a pure-Rust, embedded, ACID key-value store (copy-on-write B-trees, like
//! LMDB) with a stable file format, crash safety that its authors fuzz and test under simulated
//! power loss, and no C toolchain or system library to build. A commit with
//! `Durability::Immediate` (the default) has fsynced before `commit()` returns, which is exactly
//! what [`Backend::commit`] promises the store: a write is acknowledged to a client only after
//! it is on disk, so `kill -9` right after a 200/201 loses nothing. SQLite would do too; redb
//! avoids a bundled C build and gives typed tables.
//!
//! Layout: table `objects` maps `resource \0 namespace \0 name` to the object's JSON; table
//! `meta` holds the resourceVersion counter under `rv`, written in the same transaction as
//! every mutation, so the counter never goes back after a restart (a delete bumps it too).
//!
//! Throughput: the store hands over every write queued while the previous commit ran as one
//! batch, one transaction and one fsync ([`Backend::commit_batch`]).
//!
//! Failure (disk full, I/O error): the transaction is not committed, the store undoes the
//! batch (no reader ever saw it) and answers its writers with the error. The counter is only
//! ever raised: [`Backend::persist_counter`] writes it alone when the store checks whether
//! storage works again, so the versions the failed writes took are never handed out twice.

use pv_store::{Backend, Mutation, PendingWrite, Snapshot};
use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use std::path::{Path, PathBuf};

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const RV_KEY: &str = "rv";
/// File name of the database inside the store directory.
pub const DB_FILE: &str = "objects.redb";

/// Why the durable store could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The directory could not be created.
    #[error("creating store directory {path}: {source}")]
    CreateDir {
        /// Directory.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// redb refused to open the file (corrupt, locked by another process, ...).
    #[error("opening database {path}: {source}")]
    Open {
        /// File.
        path: PathBuf,
        /// Cause.
        #[source]
        source: redb::DatabaseError,
    },
    /// Another process still holds the database, after [`LOCK_WAIT`] of trying again.
    #[error(
        "opening database {path}: another process still holds it after {waited:?} of waiting (is another `up` running with --data-dir {}?)",
        data_dir.display()
    )]
    Locked {
        /// How long opening waited.
        waited: std::time::Duration,
        /// File.
        path: PathBuf,
        /// The data directory the user named (the database's directory's parent).
        data_dir: PathBuf,
    },
    /// Reading the snapshot failed.
    #[error("loading objects: {0}")]
    Load(String),
    /// A stored object is not valid JSON.
    #[error("stored object {key} is not valid JSON: {source}")]
    Decode {
        /// Storage key.
        key: String,
        /// Cause.
        #[source]
        source: serde_json::Error,
    },
}

/// redb's page cache. Reads are served from the store's objects in memory, so the database is
/// read once, at start, and otherwise only written: the cache holds the pages commits rewrite.
/// redb's default (1 GiB) let it grow with the database to that size for nothing.
const CACHE_BYTES: usize = 32 * 1024 * 1024;

/// How long opening waits for another process to let go of the database. A process killed
/// with SIGKILL holds its file lock until the kernel has finished tearing it down, which can
/// take a moment after its parent saw it exit (its memory unmapped, its descriptors closed); a
/// supervisor that restarts `up` at once must not see that as a crash.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The redb-backed [`Backend`].
pub struct DurableBackend {
    db: Database,
}

fn key(resource: &str, namespace: &str, name: &str) -> String {
    format!("{resource}\0{namespace}\0{name}")
}

/// Opens (or creates) the database under `dir` and loads every object and the counter.
pub fn open(dir: &Path) -> Result<(Box<dyn Backend>, Snapshot), Error> {
    let (b, s) = DurableBackend::open(dir)?;
    Ok((Box::new(b), s))
}

impl DurableBackend {
    /// Opens (or creates) `dir/objects.redb` and reads its snapshot.
    pub fn open(dir: &Path) -> Result<(Self, Snapshot), Error> {
        std::fs::create_dir_all(dir).map_err(|source| Error::CreateDir { path: dir.into(), source })?;
        let path = dir.join(DB_FILE);
        let db = open_waiting(&path, dir, LOCK_WAIT)?;
        let backend = DurableBackend { db };
        let snapshot = backend.load()?;
        Ok((backend, snapshot))
    }

    fn load(&self) -> Result<Snapshot, Error> {
        let e = |x: &dyn std::fmt::Display| Error::Load(x.to_string());
        // Make sure the tables exist so a fresh file reads as empty.
        let w = self.db.begin_write().map_err(|x| e(&x))?;
        w.open_table(OBJECTS).map_err(|x| e(&x))?;
        w.open_table(META).map_err(|x| e(&x))?;
        w.commit().map_err(|x| e(&x))?;
        let r = self.db.begin_read().map_err(|x| e(&x))?;
        let meta = r.open_table(META).map_err(|x| e(&x))?;
        let rv = meta.get(RV_KEY).map_err(|x| e(&x))?.map(|g| g.value()).unwrap_or(0);
        let objects_t = r.open_table(OBJECTS).map_err(|x| e(&x))?;
        let mut objects = Vec::with_capacity(objects_t.len().map_err(|x| e(&x))? as usize);
        for row in objects_t.iter().map_err(|x| e(&x))? {
            let (k, v) = row.map_err(|x| e(&x))?;
            let k = k.value();
            let resource = k.split('\0').next().unwrap_or_default().to_string();
            let obj = pv_store::Object::from_json(v.value())
                .map_err(|source| Error::Decode { key: k.replace('\0', "/"), source })?;
            objects.push((resource, obj));
        }
        Ok(Snapshot { rv, objects })
    }

    fn write(&self, rv: u64, m: &Mutation<'_>) -> Result<(), Box<dyn std::error::Error>> {
        let w = self.db.begin_write()?;
        {
            let mut t = w.open_table(OBJECTS)?;
            match m {
                Mutation::Put { resource, namespace, name, object } => {
                    t.insert(key(resource, namespace, name).as_str(), object.text().as_bytes())?;
                }
                Mutation::Delete { resource, namespace, name } => {
                    t.remove(key(resource, namespace, name).as_str())?;
                }
            }
            raise_counter(&mut w.open_table(META)?, rv)?;
        }
        w.commit()?;
        Ok(())
    }
}

/// Opens the database file, trying again for up to `wait` ([`LOCK_WAIT`]; backing off from
/// 20 ms to 500 ms) while another process holds its lock.
fn open_waiting(path: &Path, dir: &Path, wait: std::time::Duration) -> Result<Database, Error> {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(20);
    let mut told = false;
    loop {
        match redb::Builder::new().set_cache_size(CACHE_BYTES).create(path) {
            Ok(db) => return Ok(db),
            Err(redb::DatabaseError::DatabaseAlreadyOpen) if start.elapsed() < wait => {
                if !told {
                    tracing::warn!(path = %path.display(), "the database is held by another process; waiting for it");
                    told = true;
                }
                std::thread::sleep(pause.min(wait.saturating_sub(start.elapsed())));
                pause = (pause * 2).min(std::time::Duration::from_millis(500));
            }
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                let data_dir = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(dir).to_path_buf();
                return Err(Error::Locked { path: path.into(), data_dir, waited: wait });
            }
            Err(source) => return Err(Error::Open { path: path.into(), source }),
        }
    }
}

impl DurableBackend {
    fn write_batch(&self, batch: &[PendingWrite]) -> Result<(), Box<dyn std::error::Error>> {
        let w = self.db.begin_write()?;
        {
            let mut t = w.open_table(OBJECTS)?;
            for p in batch {
                let k = key(p.resource, &p.namespace, &p.name);
                match &p.object {
                    Some(o) => {
                        t.insert(k.as_str(), o.text().as_bytes())?;
                    }
                    None => {
                        t.remove(k.as_str())?;
                    }
                }
            }
            if let Some(last) = batch.last() {
                raise_counter(&mut w.open_table(META)?, last.rv)?;
            }
        }
        w.commit()?;
        Ok(())
    }
}

/// Stores `rv` as the counter unless it already holds a higher one.
fn raise_counter(meta: &mut redb::Table<'_, &str, u64>, rv: u64) -> Result<(), redb::StorageError> {
    let stored = meta.get(RV_KEY)?.map(|g| g.value()).unwrap_or(0);
    if rv > stored {
        meta.insert(RV_KEY, rv)?;
    }
    Ok(())
}

impl Backend for DurableBackend {
    fn commit(&self, rv: u64, mutation: &Mutation<'_>) -> Result<(), String> {
        self.write(rv, mutation).map_err(|e| format!("persisting resourceVersion {rv}: {e}"))
    }

    /// One transaction (one fsync) for the whole batch: the group commit.
    fn commit_batch(&self, batch: &[PendingWrite]) -> Result<(), String> {
        let (first, last) = (batch.first().map_or(0, |w| w.rv), batch.last().map_or(0, |w| w.rv));
        self.write_batch(batch).map_err(|e| format!("persisting resourceVersions {first}..={last}: {e}"))
    }

    fn persist_counter(&self, rv: u64) -> Result<(), String> {
        let write = || -> Result<(), Box<dyn std::error::Error>> {
            let w = self.db.begin_write()?;
            raise_counter(&mut w.open_table(META)?, rv)?;
            w.commit()?;
            Ok(())
        };
        write().map_err(|e| format!("persisting resourceVersion {rv}: {e}"))
    }
}

/// A durable backend whose disk can be made full, for tests of storage failure.
#[cfg(test)]
pub(crate) mod full_disk {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// Fails every write with ENOSPC while `full` is set.
    pub(crate) struct FullDisk {
        pub(crate) inner: DurableBackend,
        pub(crate) full: Arc<AtomicBool>,
    }

    impl FullDisk {
        fn check(&self) -> Result<(), String> {
            match self.full.load(Ordering::SeqCst) {
                true => Err(std::io::Error::from_raw_os_error(28).to_string()),
                false => Ok(()),
            }
        }
    }

    impl Backend for FullDisk {
        fn commit(&self, rv: u64, m: &Mutation<'_>) -> Result<(), String> {
            self.check()?;
            self.inner.commit(rv, m)
        }
        fn commit_batch(&self, batch: &[PendingWrite]) -> Result<(), String> {
            self.check()?;
            self.inner.commit_batch(batch)
        }
        fn persist_counter(&self, rv: u64) -> Result<(), String> {
            self.check()?;
            self.inner.persist_counter(rv)
        }
    }

    /// A store over `dir` and the switch that fills its disk.
    pub(crate) fn store(dir: &Path) -> (pv_store::Store, Arc<AtomicBool>) {
        let (inner, snapshot) = DurableBackend::open(dir).unwrap();
        let full = Arc::new(AtomicBool::new(false));
        let b = FullDisk { inner, full: full.clone() };
        (pv_store::Store::builder().backend(Box::new(b), snapshot).build(), full)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pv_store::Store;
    use serde_json::json;
    use std::time::Instant;

    fn pv(name: &str) -> serde_json::Value {
        json!({"metadata": {"name": name, "labels": {"app": "bench"}}, "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"], "hostPath": {"path": format!("/tmp/{name}")}}})
    }

    fn store_at(dir: &Path) -> Store {
        let (b, s) = open(dir).unwrap();
        Store::builder().backend(b, s).build()
    }

    #[test]
    fn reopened_store_has_every_object_and_continues_the_counter() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = store_at(dir.path());
            s.create("persistentvolumes", pv("a")).unwrap();
            s.create("persistentvolumes", pv("b")).unwrap();
            s.delete("persistentvolumes", "", "b", None, None).unwrap();
            assert_eq!(s.resource_version(), 3);
        }
        let s = store_at(dir.path());
        assert_eq!(s.resource_version(), 3, "a delete's version is kept too");
        assert!(s.get("persistentvolumes", "", "a").is_ok());
        assert_eq!(s.get("persistentvolumes", "", "b").unwrap_err().code(), 404);
        let c = s.create("persistentvolumes", pv("c")).unwrap();
        assert_eq!(c["metadata"]["resourceVersion"], "4");
    }

    /// Measures start-up (open + load + build) at N objects, and durable creates per second by
    /// one writer, which waits for its own fsync each time (concurrent writers share one commit:
    /// `concurrent_writers_are_group_committed_and_all_survive_a_reopen`).
    /// `PV_BENCH_N=100000 cargo test -p pv-apiserver --release startup -- --ignored --nocapture`
    /// prints both figures.
    #[test]
    #[ignore]
    fn startup_and_write_throughput_bench() {
        let n: usize = std::env::var("PV_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
        let dir = tempfile::tempdir_in(".").unwrap();
        {
            // Bulk-load in large transactions (the bench is about reading back).
            let (b, _) = DurableBackend::open(dir.path()).unwrap();
            let mem = Store::new();
            for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
                let w = b.db.begin_write().unwrap();
                {
                    let mut t = w.open_table(OBJECTS).unwrap();
                    for i in chunk {
                        let name = format!("pv-{i:07}");
                        let o = mem.create("persistentvolumes", pv(&name)).unwrap();
                        let bytes = serde_json::to_vec(&*o).unwrap();
                        t.insert(key("persistentvolumes", "", &name).as_str(), bytes.as_slice()).unwrap();
                    }
                    w.open_table(META).unwrap().insert(RV_KEY, n as u64).unwrap();
                }
                w.commit().unwrap();
            }
        }
        let t0 = Instant::now();
        let s = store_at(dir.path());
        let startup = t0.elapsed();
        assert_eq!(s.list("persistentvolumes", &Default::default()).unwrap().0.len(), n);
        let writes = 2000;
        let t1 = Instant::now();
        for i in 0..writes {
            s.create("persistentvolumes", pv(&format!("new-{i}"))).unwrap();
        }
        let per_sec = writes as f64 / t1.elapsed().as_secs_f64();
        println!("startup at {n} objects: {startup:?}; durable creates: {per_sec:.0}/s");
    }

    #[test]
    fn opening_waits_for_a_holder_that_lets_go_and_names_the_directory_when_it_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let (held, _) = DurableBackend::open(&store).unwrap();
        let path = store.join(DB_FILE);
        let err = open_waiting(&path, &store, std::time::Duration::from_millis(100)).err().unwrap();
        let msg = err.to_string();
        assert!(matches!(err, Error::Locked { .. }), "{msg}");
        assert!(msg.contains(&format!("--data-dir {}", dir.path().display())), "{msg}");
        // A previous process still exiting: it lets go a second later.
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(1));
            drop(held);
        });
        let (_, snapshot) = DurableBackend::open(&store).unwrap();
        release.join().unwrap();
        assert_eq!(snapshot.rv, 0);
    }

    #[test]
    fn a_failed_commit_leaves_nothing_on_disk_and_its_versions_are_skipped_after_a_restart() {
        use std::sync::atomic::Ordering;
        let dir = tempfile::tempdir().unwrap();
        {
            let (s, full) = full_disk::store(dir.path());
            s.create("persistentvolumes", pv("a")).unwrap();
            full.store(true, Ordering::SeqCst);
            assert_eq!(s.create("persistentvolumes", pv("b")).unwrap_err().code(), 500);
            assert_eq!(s.create("persistentvolumes", pv("c")).unwrap_err().code(), 500);
            assert_eq!(s.get("persistentvolumes", "", "b").unwrap_err().code(), 404);
            assert!(s.check_storage().is_some());
            full.store(false, Ordering::SeqCst);
            assert!(s.check_storage().is_none(), "ready again once storage works");
        }
        let s = store_at(dir.path());
        assert_eq!(s.get("persistentvolumes", "", "b").unwrap_err().code(), 404);
        assert_eq!(s.list("persistentvolumes", &Default::default()).unwrap().0.len(), 1);
        let d = s.create("persistentvolumes", pv("d")).unwrap();
        assert_eq!(d["metadata"]["resourceVersion"], "4", "versions 2 and 3 went to the failed writes");
    }

    #[test]
    fn concurrent_writers_are_group_committed_and_all_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        {
            let s = std::sync::Arc::new(store_at(dir.path()));
            let threads: Vec<_> = (0..8)
                .map(|t| {
                    let s = s.clone();
                    std::thread::spawn(move || {
                        for i in 0..100 {
                            s.create("persistentvolumes", pv(&format!("t{t}-{i}"))).unwrap();
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
        }
        let elapsed = started.elapsed();
        let s = store_at(dir.path());
        assert_eq!(s.resource_version(), 800);
        let (items, _) = s.list("persistentvolumes", &Default::default()).unwrap();
        assert_eq!(items.len(), 800);
        println!("800 durable creates from 8 threads in {elapsed:?} ({:.0}/s)", 800.0 / elapsed.as_secs_f64());
    }

    #[test]
    fn watchers_see_writes_only_after_they_are_durable_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let s = std::sync::Arc::new(store_at(dir.path()));
        let mut w = s.watch("persistentvolumes", None, Some(0)).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for i in 0..25 {
                        s.create("persistentvolumes", pv(&format!("w{t}-{i}"))).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut last = 0;
        for _ in 0..100 {
            let ev = w.try_recv().expect("every acknowledged write was published");
            assert!(ev.rv > last, "events in order");
            last = ev.rv;
        }
        assert!(w.try_recv().is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tasks_awaiting_durability_share_commits_and_every_write_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = std::sync::Arc::new(store_at(dir.path()));
            let mut w = s.watch("persistentvolumes", None, Some(0)).unwrap();
            let tasks: Vec<_> = (0..64)
                .map(|t| {
                    let s = s.clone();
                    tokio::spawn(async move {
                        for i in 0..10 {
                            let name = format!("a{t}-{i}");
                            let o =
                                s.create_written("persistentvolumes", pv(&name)).unwrap().durable(&s).await.unwrap();
                            assert_eq!(o["metadata"]["name"], name.as_str());
                            // Answered once durable, so readers already see it.
                            assert!(s.get("persistentvolumes", "", &name).is_ok());
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
            let mut last = 0;
            for _ in 0..640 {
                let ev = w.try_recv().expect("every answered write was published");
                assert!(ev.rv > last, "events in order");
                last = ev.rv;
            }
        }
        let s = store_at(dir.path());
        assert_eq!(s.list("persistentvolumes", &Default::default()).unwrap().0.len(), 640);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_whose_caller_gives_up_waiting_still_becomes_durable() {
        let dir = tempfile::tempdir().unwrap();
        let s = std::sync::Arc::new(store_at(dir.path()));
        let written = s.create_written("persistentvolumes", pv("abandoned")).unwrap();
        // The caller goes away (a client that disconnected) before its answer is awaited, and
        // no other write comes to commit the batch.
        drop(written.durable(&s));
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while s.get("persistentvolumes", "", "abandoned").is_err() {
            assert!(Instant::now() < deadline, "a write writers see was never committed");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        drop(s);
        assert!(store_at(dir.path()).get("persistentvolumes", "", "abandoned").is_ok(), "and it is on disk");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_commit_is_the_answer_of_every_task_awaiting_it() {
        use std::sync::atomic::Ordering;
        let dir = tempfile::tempdir().unwrap();
        let (s, full) = full_disk::store(dir.path());
        let s = std::sync::Arc::new(s);
        full.store(true, Ordering::SeqCst);
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let s = s.clone();
                tokio::spawn(
                    async move { s.create_written("persistentvolumes", pv(&format!("f{i}")))?.durable(&s).await },
                )
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.unwrap().unwrap_err().code(), 500);
        }
        assert_eq!(s.list("persistentvolumes", &Default::default()).unwrap().0.len(), 0, "nothing published");
        full.store(false, Ordering::SeqCst);
        let o = s.create_written("persistentvolumes", pv("after")).unwrap().durable(&s).await.unwrap();
        assert_eq!(o["metadata"]["name"], "after");
    }
}
