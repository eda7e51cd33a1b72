//! Per-backend lists of what the current transaction owns (storage to free,
//! in-place updates to undo, snapshot references to release), each entry
//! tagged with the subtransaction level that added it. A committed
//! subtransaction hands its entries to its parent; an aborted one gives
//! them back to its owner module to act on.

pub struct XactList<T> {
    entries: Vec<(i32, T)>,
}

fn nest_level() -> i32 {
    // SAFETY: plain accessor of transaction state.
    unsafe { crate::pg_leaf::GetCurrentTransactionNestLevel() }
}

impl<T> XactList<T> {
    pub const fn new() -> Self {
        XactList { entries: Vec::new() }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Add `item` for the current (sub)transaction.
    pub fn push(&mut self, item: T) {
        self.entries.push((nest_level(), item));
    }

    /// Remove the newest entry matching `pred`.
    pub fn remove_last(&mut self, pred: impl Fn(&T) -> bool) -> Option<T> {
        let i = self.entries.iter().rposition(|(_, x)| pred(x))?;
        Some(self.entries.remove(i).1)
    }

    /// Forget every entry (transaction end, nothing to do).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Every entry, oldest first, leaving the list empty (transaction end).
    pub fn take_all(&mut self) -> Vec<T> {
        std::mem::take(&mut self.entries).into_iter().map(|(_, x)| x).collect()
    }

    /// In a subtransaction-commit callback: the entries of the committing
    /// subtransaction (and of deeper ones) now belong to its parent.
    pub fn hand_to_parent(&mut self) {
        let level = nest_level();
        for (l, _) in self.entries.iter_mut() {
            if *l >= level {
                *l = level - 1;
            }
        }
    }

    /// In a subtransaction-abort callback: remove and return the entries of
    /// the aborting subtransaction (and of deeper ones), oldest first.
    pub fn take_aborted(&mut self) -> Vec<T> {
        let level = nest_level();
        let (mine, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.entries).into_iter().partition(|(l, _)| *l >= level);
        self.entries = keep;
        mine.into_iter().map(|(_, x)| x).collect()
    }
}
