//! Tool search: a compact in-memory BM25F index over the catalog's entries, kept in step
//! with every publish (one entry's change updates that entry's postings only; a source's
//! whole list is re-indexed only when the whole list is replaced, at start or a manifest
//! reload).
//!
//! Text becomes terms in [`terms`](crate::catalog::terms): [`text`](crate::catalog::terms::text) (normalisation, case
//! folding, word splitting, stemming) and [`fields`](crate::catalog::terms::fields) (a tool's searchable fields).
//!
//! **Ranking.** BM25F: a term's frequency in each field is weighted and normalised by the
//! field's length against its average, summed, then saturated once with `k1`; the sum over
//! the query's distinct terms, each weighted by its inverse document frequency, is the
//! score. A query that is a tool's name (ignoring case) ranks that tool first. Ties are
//! broken by name, so every replica with the same catalog answers the same list.
//!
//! **Visibility** follows the snapshot's rules exactly: a name served by an earlier source
//! hides a later one, a pending version is seen by its author only (in place of the live
//! one), a caller sees only what its scopes allow, an unlisted entry is not found.
//!
//! **Memory.** A posting is 6 bytes (document slot, a few bits of frequency per field); a
//! term is an inline key (no allocation), and a term in one tool only keeps its posting
//! inline too. A document slot keeps its entry (shared with the snapshot) and its field
//! lengths. Frequencies and lengths saturate, which BM25's saturation makes harmless.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use crate::auth::Scope;
use crate::catalog::entry::{Entry, ToolSource};
use crate::catalog::terms::fields::{self, FIELDS, Field};
use crate::catalog::terms::text::Analyzer;

/// The ranking's parameters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Weights {
    /// Term frequency saturation.
    pub(crate) k1: f32,
    /// Each field's weight, by [`Field`].
    pub(crate) weight: [f32; FIELDS],
    /// Each field's length normalisation (0: none, 1: full), by [`Field`].
    pub(crate) b: [f32; FIELDS],
    /// Whether English words are stemmed.
    pub(crate) stem: bool,
}

impl Weights {
    /// The weights tuned on the training split of the LiveMCPBench tool-retrieval set
    /// (`scripts/bench` w8-search; the split and the figures are in `bench/RESULTS.md`).
    pub(crate) const TUNED: Weights = Weights {
        k1: 1.6,
        weight: [5.0, 2.0, 1.0, 1.0, 0.3],
        b: [0.75, 0.5, 0.9, 0.75, 0.0],
        stem: true,
    };
}

/// A posting: the document's slot and its frequency in each field, saturated: name and
/// title 3 bits each, description and parameters 4 bits each, annotations 2 bits. Six bytes.
#[derive(Debug, Clone, Copy)]
#[repr(C, packed(2))]
struct Posting {
    doc: u32,
    tfs: u16,
}

/// Where each field's frequency sits in [`Posting::tfs`]: (shift, bits), by [`Field`].
const TF_BITS: [(u16, u16); FIELDS] = [(0, 3), (3, 3), (6, 4), (10, 4), (14, 2)];

impl Posting {
    fn tf(self, field: usize) -> u16 {
        let (shift, bits) = TF_BITS[field];
        (self.tfs >> shift) & ((1 << bits) - 1)
    }
}

/// A term, inline: its length, then its bytes (terms are at most
/// [`MAX_TERM_BYTES`](crate::catalog::terms::text::MAX_TERM_BYTES) long).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Term([u8; 24]);

impl Term {
    fn new(text: &str) -> Term {
        let mut bytes = [0u8; 24];
        let len = text.len().min(23);
        bytes[0] = len as u8;
        bytes[1..=len].copy_from_slice(&text.as_bytes()[..len]);
        Term(bytes)
    }
}

/// A term's postings: most terms of a large catalog are in one tool only (an id in a name).
#[derive(Debug)]
enum Postings {
    One(Posting),
    Many(Vec<Posting>),
}

impl Postings {
    fn as_slice(&self) -> &[Posting] {
        match self {
            Postings::One(p) => std::slice::from_ref(p),
            Postings::Many(list) => list,
        }
    }

    /// Adds `p`; `exact`: grow by exactly one (an update of a long-lived list), else as a
    /// `Vec` does (a whole source being indexed, shrunk at the end).
    fn push(&mut self, p: Posting, exact: bool) {
        match self {
            Postings::One(first) => *self = Postings::Many(vec![*first, p]),
            Postings::Many(list) => {
                if exact {
                    list.reserve_exact(1);
                }
                list.push(p);
            }
        }
    }

    /// Removes the posting of `doc`; whether any is left.
    fn remove(&mut self, doc: u32) -> bool {
        match self {
            Postings::One(p) => p.doc != doc,
            Postings::Many(list) => {
                if let Some(i) = list.iter().position(|p| p.doc == doc) {
                    list.swap_remove(i);
                }
                if let [only] = list[..] {
                    *self = Postings::One(only);
                }
                true
            }
        }
    }
}

/// No slot.
const NONE: u32 = u32::MAX;

/// One entry's terms with their frequencies per field, and its field lengths.
#[derive(Default)]
struct Analyzed {
    terms: Vec<(Term, u16)>,
    lens: [u8; FIELDS],
}

/// One indexed entry.
struct Doc {
    entry: Arc<Entry>,
    /// Whether it is a pending version (its author: [`Index::authors`]).
    pending: bool,
    /// Whether the merged catalog serves it under its name (no earlier source has the
    /// name). Pending versions: never.
    served: bool,
    /// The next document of the same name ([`NONE`]: the last).
    next: u32,
}

/// A search's caller and filters.
pub(crate) struct Query<'a> {
    /// The words searched for.
    pub(crate) text: &'a str,
    /// The caller's principal id (its pending versions replace the live ones).
    pub(crate) principal: Option<&'a str>,
    /// Which scopes the caller holds.
    pub(crate) allows: &'a dyn Fn(Scope) -> bool,
    /// Which entries qualify at all (the source filter).
    pub(crate) keep: &'a dyn Fn(&Entry) -> bool,
    /// How many hits to return.
    pub(crate) limit: usize,
}

/// What a search found.
pub(crate) struct Hits {
    /// The best hits, best first: each entry with its score.
    pub(crate) hits: Vec<(Arc<Entry>, f32)>,
    /// How many entries matched, before the limit.
    pub(crate) total: usize,
}

/// The index.
pub(crate) struct Index {
    analyzer: Analyzer,
    weights: Weights,
    terms: HashMap<Term, Postings>,
    docs: Vec<Option<Doc>>,
    /// Each slot's length in terms per field (saturated); dense, for the scoring loop.
    lens: Vec<[u8; FIELDS]>,
    free: Vec<u32>,
    /// The first slot of each name (the rest: [`Doc::next`]).
    names: HashMap<Arc<str>, u32>,
    /// The pending versions' authors, by slot.
    authors: HashMap<u32, Arc<str>>,
    len_sums: [u64; FIELDS],
    live: usize,
}

impl Default for Index {
    fn default() -> Index {
        Index::new(Weights::TUNED)
    }
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("docs", &self.live)
            .field("terms", &self.terms.len())
            .finish_non_exhaustive()
    }
}

impl Index {
    /// An empty index ranking with `weights`.
    pub(crate) fn new(weights: Weights) -> Index {
        Index {
            analyzer: Analyzer::new(weights.stem),
            weights,
            terms: HashMap::new(),
            docs: Vec::new(),
            lens: Vec::new(),
            free: Vec::new(),
            names: HashMap::new(),
            authors: HashMap::new(),
            len_sums: [0; FIELDS],
            live: 0,
        }
    }

    /// How many entries are indexed (pending versions and hidden duplicates included).
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Indexes `entry` (a pending version of `author`'s when given), replacing what was
    /// indexed under the same source, name and author.
    pub(crate) fn upsert(&mut self, entry: Arc<Entry>, author: Option<Arc<str>>) {
        if let Some(slot) = self.find(entry.source, &entry.name, author.as_deref()) {
            self.remove_slot(slot);
        }
        self.add(entry, author, true);
    }

    /// Removes the entry `name` of `source` (not a pending version).
    pub(crate) fn remove(&mut self, source: ToolSource, name: &str) {
        if let Some(slot) = self.find(source, name, None) {
            self.remove_slot(slot);
        }
    }

    /// Replaces every entry of `source` (not pending versions) with `entries`.
    pub(crate) fn replace_source(&mut self, source: ToolSource, entries: &[Arc<Entry>]) {
        self.remove_where(|d| d.entry.source == source && !d.pending);
        // Analysed on every core (a replica's start-up indexes 100,000 tools), inserted in
        // order.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
        let chunk = entries.len().div_ceil(threads).max(1024);
        let analyzed: Vec<Analyzed> = std::thread::scope(|scope| {
            let workers: Vec<_> = entries
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(|| part.iter().map(|e| self.analyze(e)).collect::<Vec<_>>())
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap_or_default())
                .collect()
        });
        for (entry, analyzed) in entries.iter().zip(analyzed) {
            // A list holds a name once; should it not, the later entry is indexed.
            if let Some(slot) = self.find(source, &entry.name, None) {
                self.remove_slot(slot);
            }
            self.insert(entry.clone(), None, analyzed, false);
        }
        for postings in self.terms.values_mut() {
            if let Postings::Many(list) = postings {
                list.shrink_to_fit();
            }
        }
        self.terms.shrink_to_fit();
        self.names.shrink_to_fit();
        self.docs.shrink_to_fit();
        self.lens.shrink_to_fit();
    }

    /// Replaces the pending versions: of tool `name` only, or all of them (`None`).
    pub(crate) fn replace_pending(
        &mut self,
        name: Option<&str>,
        entries: &[(Arc<str>, Arc<Entry>)],
    ) {
        self.remove_where(|d| d.pending && name.is_none_or(|n| *d.entry.name == *n));
        for (author, entry) in entries {
            self.upsert(entry.clone(), Some(author.clone()));
        }
    }

    /// The entries matching `query` that its caller may see, best first.
    pub(crate) fn search(&self, query: &Query<'_>) -> Hits {
        let mut terms = Vec::new();
        self.analyzer
            .terms(query.text, &mut |t| terms.push(Term::new(t)));
        terms.sort_unstable();
        terms.dedup();
        let n = self.live.max(1) as f32;
        // Each field's weight over its length normalisation, per saturated length.
        let mut norms = [[0f32; 256]; FIELDS];
        for (f, norm) in norms.iter_mut().enumerate() {
            let avg = (self.len_sums[f] as f32 / n).max(1.0);
            let b = self.weights.b[f];
            for (len, v) in norm.iter_mut().enumerate() {
                *v = self.weights.weight[f] / (1.0 - b + b * len as f32 / avg);
            }
        }
        let k1 = self.weights.k1;
        let mut scores = vec![0f32; self.docs.len()];
        let mut touched = Vec::new();
        for term in &terms {
            let Some(postings) = self.terms.get(term) else {
                continue;
            };
            let list = postings.as_slice();
            let df = list.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &p in list {
                let doc = p.doc as usize;
                let lens = &self.lens[doc];
                let mut tf = 0.0;
                for (f, norm) in norms.iter().enumerate() {
                    let freq = p.tf(f);
                    if freq != 0 {
                        tf += f32::from(freq) * norm[lens[f] as usize];
                    }
                }
                let add = idf * tf * (k1 + 1.0) / (k1 + tf);
                if add <= 0.0 {
                    continue;
                }
                let score = &mut scores[doc];
                if *score == 0.0 {
                    touched.push(p.doc);
                }
                *score += add;
            }
        }
        let shadowed = self.shadowed_for(query.principal);
        let visible = |slot: u32| -> bool {
            let Some(doc) = &self.docs[slot as usize] else {
                return false;
            };
            let seen = if doc.pending {
                query
                    .principal
                    .is_some_and(|p| self.authors.get(&slot).is_some_and(|a| **a == *p))
                    && self.pending_counts(doc)
            } else {
                doc.served && !shadowed.contains(&*doc.entry.name)
            };
            seen && doc.entry.listed && (query.allows)(doc.entry.scope) && (query.keep)(&doc.entry)
        };
        let mut found: Vec<(f32, u32)> = touched
            .into_iter()
            .filter(|&slot| visible(slot))
            .map(|slot| (scores[slot as usize], slot))
            .collect();
        // A query that is a tool's name finds that tool first.
        let exact = query.text.trim();
        let mut slot = self.names.get(exact).copied().unwrap_or(NONE);
        if slot != NONE {
            let best = found.iter().map(|(s, _)| *s).fold(0f32, f32::max) + 1.0;
            while slot != NONE {
                if visible(slot) {
                    match found.iter_mut().find(|(_, s)| *s == slot) {
                        Some(hit) => hit.0 = best,
                        None => found.push((best, slot)),
                    }
                }
                slot = self.docs[slot as usize].as_ref().map_or(NONE, |d| d.next);
            }
        }
        let total = found.len();
        let name = |slot: u32| -> &str {
            self.docs[slot as usize]
                .as_ref()
                .map_or("", |d| &*d.entry.name)
        };
        let order = |a: &(f32, u32), b: &(f32, u32)| {
            b.0.total_cmp(&a.0).then_with(|| name(a.1).cmp(name(b.1)))
        };
        let limit = query.limit.min(total);
        if limit > 0 && limit < total {
            found.select_nth_unstable_by(limit - 1, order);
        }
        found.truncate(limit);
        found.sort_by(order);
        let hits = found
            .into_iter()
            .filter_map(|(score, slot)| {
                let doc = self.docs[slot as usize].as_ref()?;
                Some((doc.entry.clone(), score))
            })
            .collect();
        Hits { hits, total }
    }

    /// The names `principal`'s pending versions replace (for it alone).
    fn shadowed_for(&self, principal: Option<&str>) -> HashSet<&str> {
        let Some(principal) = principal else {
            return HashSet::new();
        };
        self.authors
            .iter()
            .filter(|(_, a)| ***a == *principal)
            .filter_map(|(&s, _)| self.docs[s as usize].as_ref())
            .filter(|d| self.pending_counts(d))
            .map(|d| &*d.entry.name)
            .collect()
    }

    /// Whether a pending version is served to its author: no earlier source holds its name.
    fn pending_counts(&self, doc: &Doc) -> bool {
        let mut slot = self.names.get(&*doc.entry.name).copied().unwrap_or(NONE);
        while slot != NONE {
            let Some(other) = &self.docs[slot as usize] else {
                return true;
            };
            if other.served && other.entry.source != doc.entry.source {
                return false;
            }
            slot = other.next;
        }
        true
    }

    /// The slot of `source`'s entry `name` (`author`'s pending version when given).
    fn find(&self, source: ToolSource, name: &str, author: Option<&str>) -> Option<u32> {
        let mut slot = self.names.get(name).copied().unwrap_or(NONE);
        while slot != NONE {
            let doc = self.docs[slot as usize].as_ref()?;
            let same_author = match author {
                None => !doc.pending,
                Some(a) => doc.pending && self.authors.get(&slot).is_some_and(|x| **x == *a),
            };
            if doc.entry.source == source && same_author {
                return Some(slot);
            }
            slot = doc.next;
        }
        None
    }

    fn add(&mut self, entry: Arc<Entry>, author: Option<Arc<str>>, exact: bool) {
        let analyzed = self.analyze(&entry);
        self.insert(entry, author, analyzed, exact);
    }

    /// `entry`'s terms with their frequencies per field (sorted by term), and its field
    /// lengths.
    fn analyze(&self, entry: &Entry) -> Analyzed {
        let mut all: Vec<(Term, usize)> = Vec::new();
        let mut lens = [0u32; FIELDS];
        self.each_term(entry, &mut |field, term| {
            lens[field as usize] += 1;
            all.push((Term::new(term), field as usize));
        });
        all.sort_unstable();
        let mut terms: Vec<(Term, u16)> = Vec::new();
        for (term, f) in all {
            let (shift, bits) = TF_BITS[f];
            let max = (1 << bits) - 1;
            match terms.last_mut() {
                Some((last, tfs)) if *last == term => {
                    if (*tfs >> shift) & max < max {
                        *tfs += 1 << shift;
                    }
                }
                _ => terms.push((term, 1 << shift)),
            }
        }
        Analyzed {
            terms,
            lens: lens.map(|l| u8::try_from(l).unwrap_or(u8::MAX)),
        }
    }

    fn insert(
        &mut self,
        entry: Arc<Entry>,
        author: Option<Arc<str>>,
        analyzed: Analyzed,
        exact: bool,
    ) {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.docs.push(None);
                self.lens.push([0; FIELDS]);
                u32::try_from(self.docs.len() - 1).unwrap_or(NONE)
            }
        };
        for (term, tfs) in analyzed.terms {
            let p = Posting { doc: slot, tfs };
            match self.terms.get_mut(&term) {
                Some(postings) => postings.push(p, exact),
                None => {
                    self.terms.insert(term, Postings::One(p));
                }
            }
        }
        let lens = analyzed.lens;
        for (sum, len) in self.len_sums.iter_mut().zip(lens) {
            *sum += u64::from(len);
        }
        self.lens[slot as usize] = lens;
        let next = self.names.insert(entry.name.clone(), slot).unwrap_or(NONE);
        let pending = author.is_some();
        if let Some(author) = author {
            self.authors.insert(slot, author);
        }
        let name = entry.name.clone();
        self.docs[slot as usize] = Some(Doc {
            entry,
            pending,
            served: false,
            next,
        });
        self.live += 1;
        self.settle(&name);
    }

    fn remove_slot(&mut self, slot: u32) {
        let Some(doc) = self.docs[slot as usize].take() else {
            return;
        };
        let mut terms = HashSet::new();
        self.each_term(&doc.entry, &mut |_, term| {
            terms.insert(Term::new(term));
        });
        for term in terms {
            if let Some(postings) = self.terms.get_mut(&term)
                && !postings.remove(slot)
            {
                self.terms.remove(&term);
            }
        }
        self.forget(slot, doc);
    }

    /// Removes every document `pred` picks: one by one when they are few, else in one pass
    /// over the postings.
    fn remove_where(&mut self, pred: impl Fn(&Doc) -> bool) {
        let slots: Vec<u32> = (0..self.docs.len())
            .filter(|&s| self.docs[s].as_ref().is_some_and(&pred))
            .filter_map(|s| u32::try_from(s).ok())
            .collect();
        if slots.len() < 64 {
            for slot in slots {
                self.remove_slot(slot);
            }
            return;
        }
        let mut gone = vec![false; self.docs.len()];
        for &slot in &slots {
            gone[slot as usize] = true;
        }
        self.terms.retain(|_, postings| match postings {
            Postings::One(p) => !gone[p.doc as usize],
            Postings::Many(list) => {
                list.retain(|p| !gone[p.doc as usize]);
                match list[..] {
                    [] => false,
                    [only] => {
                        *postings = Postings::One(only);
                        true
                    }
                    _ => true,
                }
            }
        });
        for slot in slots {
            if let Some(doc) = self.docs[slot as usize].take() {
                self.forget(slot, doc);
            }
        }
    }

    /// The bookkeeping of a removed document's slot: lengths, the name's chain, the author.
    fn forget(&mut self, slot: u32, doc: Doc) {
        for (sum, len) in self.len_sums.iter_mut().zip(self.lens[slot as usize]) {
            *sum -= u64::from(len);
        }
        self.lens[slot as usize] = [0; FIELDS];
        let name = &doc.entry.name;
        if let Some(&head) = self.names.get(&**name) {
            if head == slot {
                if doc.next == NONE {
                    self.names.remove(&**name);
                } else {
                    self.names.insert(name.clone(), doc.next);
                }
            } else {
                let mut at = head;
                while at != NONE {
                    let Some(d) = self.docs[at as usize].as_mut() else {
                        break;
                    };
                    if d.next == slot {
                        d.next = doc.next;
                        break;
                    }
                    at = d.next;
                }
            }
        }
        self.authors.remove(&slot);
        self.free.push(slot);
        self.live -= 1;
        self.settle(name);
    }

    /// Recomputes which of the documents named `name` the merge serves: the earliest
    /// source's (pending versions never).
    fn settle(&mut self, name: &str) {
        let mut chain = Vec::new();
        let mut slot = self.names.get(name).copied().unwrap_or(NONE);
        while slot != NONE {
            let Some(doc) = &self.docs[slot as usize] else {
                break;
            };
            chain.push((slot, doc.pending, doc.entry.source));
            slot = doc.next;
        }
        let first = chain
            .iter()
            .filter(|(_, pending, _)| !pending)
            .map(|(_, _, source)| *source)
            .min();
        for (slot, pending, source) in chain {
            if let Some(doc) = self.docs[slot as usize].as_mut() {
                doc.served = !pending && Some(source) == first;
            }
        }
    }

    /// Each term of `entry`'s fields, with its field.
    fn each_term(&self, entry: &Entry, emit: &mut dyn FnMut(Field, &str)) {
        let Ok(tool) = serde_json::from_str::<Value>(entry.listing()) else {
            return;
        };
        let analyzer = &self.analyzer;
        fields::each(&tool, &mut |field, text| {
            analyzer.terms(text, &mut |term| emit(field, term));
        });
    }

    /// The bytes the index holds, roughly (postings, slots, the term and name tables).
    pub(crate) fn heap_bytes(&self) -> usize {
        let lists: usize = self
            .terms
            .values()
            .map(|p| match p {
                Postings::One(_) => 0,
                Postings::Many(list) => list.capacity() * size_of::<Posting>(),
            })
            .sum();
        let terms = self.terms.capacity() * (size_of::<Term>() + size_of::<Postings>() + 1);
        let docs = self.docs.capacity() * (size_of::<Option<Doc>>() + size_of::<[u8; FIELDS]>());
        let names = self.names.capacity() * (size_of::<Arc<str>>() + 4 + 1);
        lists + terms + docs + names
    }
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
