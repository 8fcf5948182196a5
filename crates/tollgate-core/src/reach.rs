//! [`Reach`]: how much of a limit store can decide now, for readiness and
//! the `tollgate_store_up` gauge.

/// How much of a store can decide: `answering` parts of `of` (a Redis
/// Cluster's 16,384 hash slots; one part for a store on one server). Keys
/// in a part that does not answer get the caller's failure policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reach {
    /// The parts whose state answered.
    pub answering: u32,
    /// Every part.
    pub of: u32,
}

impl Reach {
    /// All of a store on one server.
    pub const WHOLE: Reach = Reach {
        answering: 1,
        of: 1,
    };

    /// Whether every part answered.
    pub fn is_whole(self) -> bool {
        self.answering >= self.of
    }

    /// The share of parts that answered, from 0 to 1.
    pub fn share(self) -> f64 {
        if self.of == 0 {
            return 0.0;
        }
        f64::from(self.answering.min(self.of)) / f64::from(self.of)
    }
}

#[cfg(test)]
mod tests {
    use super::Reach;

    #[test]
    fn a_share_is_the_parts_that_answered() {
        let two_of_three_nodes = Reach {
            answering: 10_923,
            of: 16_384,
        };
        assert!(!two_of_three_nodes.is_whole());
        assert_eq!(two_of_three_nodes.share(), 10_923.0 / 16_384.0);
        assert!(Reach::WHOLE.is_whole());
        assert_eq!(Reach::WHOLE.share(), 1.0);
        assert_eq!(
            Reach {
                answering: 0,
                of: 0
            }
            .share(),
            0.0
        );
    }
}
