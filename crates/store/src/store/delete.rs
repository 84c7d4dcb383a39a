//! Deletion: preconditions, finalizers that hold an object (marked, not removed), the write
//! that removes it, and what a kind's strategy adds to marking it deleted.

use super::*;

impl Store {
    /// Deletes an object. With finalizers it only gets a deletionTimestamp; it goes when the last
    /// finalizer is removed. Preconditions (`uid`, `resourceVersion`) give 409 when they fail.
    pub fn delete(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
        rv_pre: Option<&str>,
    ) -> Result<Arc<Value>> {
        self.delete_written(resource, namespace, name, uid, rv_pre)?.wait(self)
    }

    /// [`Store::delete`] whose caller awaits durability itself, with [`Written::durable`].
    pub fn delete_written(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
        rv_pre: Option<&str>,
    ) -> Result<Written> {
        self.delete_inner(resource, namespace, name, uid, rv_pre, false)
    }

    /// Everything [`Store::delete`] does but the write: the object as the deletion would leave
    /// or mark it, or the error it would answer.
    pub fn delete_dry_run(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
        rv_pre: Option<&str>,
    ) -> Result<Arc<Value>> {
        self.delete_inner(resource, namespace, name, uid, rv_pre, true)?.wait(self)
    }

    fn delete_inner(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
        rv_pre: Option<&str>,
        dry_run: bool,
    ) -> Result<Written> {
        let rt = self.rt(resource)?;
        let ns = if rt.namespaced { namespace } else { "" };
        crate::namespaces::admit_delete(rt, name)?;
        let fault = if dry_run { None } else { self.draw_fault(rt) };
        if let Some(f) = fault.filter(|f| *f != FaultKind::LostResponse) {
            return Err(f.error(&rt.qualified(), name));
        }
        let mut inner = self.inner.lock().unwrap();
        let old = inner
            .latest(rt.key, ns, name)
            .ok_or_else(|| StoreError::NotFound { resource: rt.qualified(), name: name.into() })?
            .value();
        if let Some(u) = uid.filter(|u| !u.is_empty()) {
            if u != meta_str(&old, "uid") {
                // Named by kind, as kube-apiserver's delete preconditions name it.
                return Err(StoreError::Conflict {
                    resource: rt.qualified_kind(),
                    name: name.into(),
                    message: format!(
                        "the UID in the precondition ({u}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                        meta_str(&old, "uid")
                    ),
                });
            }
        }
        if let Some(r) = rv_pre.filter(|r| !r.is_empty()) {
            if r != meta_str(&old, "resourceVersion") {
                return Err(StoreError::Conflict {
                    resource: rt.qualified_kind(),
                    name: name.into(),
                    message: format!(
                        "the ResourceVersion in the precondition ({r}) does not match the ResourceVersion in record ({}). The object might have been modified",
                        meta_str(&old, "resourceVersion")
                    ),
                });
            }
        }
        let mut old = old;
        let adds = registry::of(rt).finalizers_on_delete();
        if !adds.is_empty() && !meta(&old).is_some_and(|m| m.contains_key("deletionTimestamp")) {
            let fins = meta_mut(&mut old).entry("finalizers").or_insert_with(|| Value::Array(Vec::new()));
            if let Some(list) = fins.as_array_mut() {
                for f in adds {
                    if !list.iter().any(|x| x == *f) {
                        list.push(Value::String((*f).into()));
                    }
                }
            }
        }
        let rv = inner.rv + 1;
        if dry_run {
            let mut would = old.clone();
            if !finalizers(&old).is_empty() && !meta(&old).is_some_and(|m| m.contains_key("deletionTimestamp")) {
                self.mark_deleted(rt, &mut would);
            }
            return Ok(Written::settled(Arc::new(would)));
        }
        let result = if finalizers(&old).is_empty() {
            let mut gone = old;
            Self::stamp(&mut gone, rv);
            self.commit(&mut inner, rt, WatchEventType::Deleted, ns, name, &gone, rv)?;
            Arc::new(gone)
        } else if meta(&old).is_some_and(|m| m.contains_key("deletionTimestamp")) {
            // Already being deleted: nothing to write, but the stored object's own commit may
            // still be pending.
            drop(inner);
            return Ok(Written::stored(Arc::new(old), Self::lost(fault, rt, name)));
        } else {
            let mut marked = old;
            self.mark_deleted(rt, &mut marked);
            Self::stamp(&mut marked, rv);
            self.commit(&mut inner, rt, WatchEventType::Modified, ns, name, &marked, rv)?;
            Arc::new(marked)
        };
        drop(inner);
        Ok(Written::pending(result, rv, Self::lost(fault, rt, name)))
    }

    /// Marks an object that finalizers hold as being deleted: its deletion timestamp, then what
    /// its kind's strategy adds.
    pub(super) fn mark_deleted(&self, rt: &ResourceType, obj: &mut Value) {
        let m = meta_mut(obj);
        m.insert("deletionTimestamp".into(), Value::String(format_time((self.now)())));
        registry::of(rt).mark_deleted(obj);
    }
}
