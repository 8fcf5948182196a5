//! The operations' names and how many arguments each takes: what the
//! reader needs to know how much to keep of an operation, and what the
//! operation's checks begin with.

/// Every operation's name and how many arguments it takes.
const OPERATIONS: [(&str, usize); 6] = [
    ("request", 2),
    ("request_batch", 3),
    ("configure", 1),
    ("reset", 1),
    ("stats", 1),
    ("assign_tier", 2),
];

/// How many arguments the operation `name` takes; `None` when no operation
/// has that name.
pub(super) fn arity(name: &str) -> Option<usize> {
    signature(name).map(|(_, arity)| arity)
}

/// The name (as `'static`) and arity of the operation `name`.
pub(super) fn signature(name: &str) -> Option<(&'static str, usize)> {
    OPERATIONS.into_iter().find(|(known, _)| *known == name)
}
