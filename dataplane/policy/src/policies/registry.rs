//! The generator behind [`registry!`](crate::registry): registry lines in,
//! `Policy`, `PolicyName` and everything that reads or writes a policy's
//! name out.
//!
//! A line is one of three forms (doc comments above a line go to its
//! variants):
//!
//! - `Variant: Type = "name",` a policy without parameters: `Type` is a
//!   unit struct implementing [`PathPolicy`](crate::PathPolicy), and
//!   `Policy::Variant` a unit variant;
//! - `Variant(Type) = "name",` a policy with parameters: `Policy::Variant`
//!   holds a `Type`, and `name` stands for `Type::default()`;
//! - `Variant = "name" => Other(VALUE),` one more name for the policy
//!   `Other` of an earlier line, standing for its parameters `VALUE` (how
//!   the LCMP ablations are registered).
//!
//! Every line adds a `PolicyName` variant; the names are listed, parsed
//! and offered by `clap` in line order.

/// Turns registry lines (see the [module docs](self)) into `Policy`,
/// `PolicyName` and their methods in the calling module. Called by
/// [`registry!`](crate::registry); call that one.
///
/// The lines are read one at a time into four lists (policies with
/// parameters, policies without, extra names, all names in order), then
/// the items are written from the lists.
#[macro_export]
#[doc(hidden)]
macro_rules! define_policies {
    // All lines read: write the items.
    (@line
        [$({ [$(#[$tm:meta])*] $tv:ident ($tty:ty) $ts:literal })*]
        [$({ [$(#[$um:meta])*] $uv:ident ($uty:ty) $us:literal })*]
        [$({ $pv:ident ($pe:expr) $ps:literal })*]
        [$({ [$(#[$nm:meta])*] $nv:ident $ns:literal ($nval:expr) })*]
    ) => {
        /// A path-selection policy with its parameters: a variant per
        /// policy of the registry. Decides with [`Policy::decide`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Policy {
            $( $(#[$tm])* $tv($tty), )*
            $( $(#[$um])* $uv, )*
        }

        /// A policy as command lines, control requests and experiment
        /// files name it: the one list of names and their spelling
        /// ([`PolicyName::name`]), generated from the registry. With the
        /// `clap` feature it is a `clap::ValueEnum` of the same names.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum PolicyName {
            $( $(#[$nm])* $nv, )*
        }

        impl PolicyName {
            /// How many names are registered.
            pub const COUNT: usize = [$(stringify!($nv)),*].len();

            /// Every policy, in [`Policy::NAMES`] order.
            pub const ALL: [PolicyName; PolicyName::COUNT] = [$(PolicyName::$nv),*];

            /// The name as written.
            pub const fn name(self) -> &'static str {
                match self {
                    $( PolicyName::$nv => $ns, )*
                }
            }

            /// The policy, with the parameters the name stands for (LCMP
            /// variants: the paper's, with an ablation's weight at 0).
            pub fn policy(self) -> Policy {
                match self {
                    $( PolicyName::$nv => $nval, )*
                }
            }
        }

        impl ::std::fmt::Display for PolicyName {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl ::std::str::FromStr for PolicyName {
            type Err = ::std::string::String;

            /// A policy by its exact name; the error lists the names.
            fn from_str(s: &str) -> ::std::result::Result<Self, ::std::string::String> {
                PolicyName::ALL
                    .into_iter()
                    .find(|p| p.name() == s)
                    .ok_or_else(|| {
                        ::std::format!(
                            "unknown policy {s:?}; one of {}",
                            Policy::NAMES.join(", ")
                        )
                    })
            }
        }

        $crate::__policy_value_enum!(PolicyName);

        // A name registered twice would parse to its first line only.
        const _: () = ::core::assert!(
            $crate::policies::all_distinct(&Policy::NAMES),
            "two registry lines have the same policy name"
        );

        impl Policy {
            /// Names accepted by [`Policy::from_name`], in registry order.
            pub const NAMES: [&'static str; PolicyName::COUNT] = [$($ns),*];

            /// A policy by name, with the parameters the name stands for.
            pub fn from_name(name: &str) -> ::core::option::Option<Policy> {
                name.parse::<PolicyName>().ok().map(PolicyName::policy)
            }

            /// The name of these parameters (metrics labels, logs, status):
            /// the first extra name of the policy whose parameters these
            /// are an instance of (`PathPolicy::is_preset`), else the
            /// policy's own name.
            #[allow(irrefutable_let_patterns)]
            pub fn name(&self) -> &'static str {
                $(
                    if let Policy::$pv(p) = self {
                        if $crate::PathPolicy::is_preset(p, &$pe) {
                            return $ps;
                        }
                    }
                )*
                match self {
                    $( Policy::$tv(_) => $ts, )*
                    $( Policy::$uv => $us, )*
                }
            }

            /// Decides the egress port of a new flow with hash `hash` among
            /// the candidates of its route, by the policy's
            /// `PathPolicy::decide`: a `match`, each arm a direct call the
            /// compiler inlines.
            #[inline]
            pub fn decide<P: $crate::PortView>(
                &self,
                set: &$crate::CandidateSet,
                ports: &P,
                hash: $crate::FlowHash,
            ) -> ::core::option::Option<$crate::Decision> {
                match self {
                    $( Policy::$tv(p) => $crate::PathPolicy::decide(p, set, ports, hash), )*
                    $(
                        Policy::$uv => $crate::PathPolicy::decide(
                            &<$uty as ::core::default::Default>::default(),
                            set,
                            ports,
                            hash,
                        ),
                    )*
                }
            }
        }
    };

    // Separators (and the comma `registry!` appends).
    (@line $tu:tt $un:tt $pr:tt $na:tt , $($rest:tt)*) => {
        $crate::define_policies!(@line $tu $un $pr $na $($rest)*);
    };

    // `Variant(Type) = "name",`: a policy with parameters.
    (@line [$($tu:tt)*] $un:tt $pr:tt [$($na:tt)*]
        $(#[$m:meta])* $v:ident ($t:ty) = $s:literal , $($rest:tt)*
    ) => {
        $crate::define_policies!(@line
            [$($tu)* { [$(#[$m])*] $v ($t) $s }]
            $un
            $pr
            [$($na)* { [$(#[$m])*] $v $s (Policy::$v(<$t as ::core::default::Default>::default())) }]
            $($rest)*
        );
    };

    // `Variant: Type = "name",`: a policy without parameters.
    (@line $tu:tt [$($un:tt)*] $pr:tt [$($na:tt)*]
        $(#[$m:meta])* $v:ident : $t:ty = $s:literal , $($rest:tt)*
    ) => {
        $crate::define_policies!(@line
            $tu
            [$($un)* { [$(#[$m])*] $v ($t) $s }]
            $pr
            [$($na)* { [$(#[$m])*] $v $s (Policy::$v) }]
            $($rest)*
        );
    };

    // `Variant = "name" => Other(VALUE),`: another name of a policy.
    (@line $tu:tt $un:tt [$($pr:tt)*] [$($na:tt)*]
        $(#[$m:meta])* $v:ident = $s:literal => $other:ident ($value:expr) , $($rest:tt)*
    ) => {
        $crate::define_policies!(@line
            $tu
            $un
            [$($pr)* { $other ($value) $s }]
            [$($na)* { [$(#[$m])*] $v $s (Policy::$other($value)) }]
            $($rest)*
        );
    };

    (@line $tu:tt $un:tt $pr:tt $na:tt $($rest:tt)+) => {
        ::core::compile_error!(::core::concat!(
            "a policy registry line must be `Variant: Type = \"name\"`, ",
            "`Variant(Type) = \"name\"` or `Variant = \"name\" => Other(VALUE)`, ",
            "each ending in a comma; the first line not read starts at: ",
            ::core::stringify!($($rest)+)
        ));
    };

    // Entry: every line ends in a comma from here on.
    ($($lines:tt)*) => {
        $crate::define_policies!(@line [] [] [] [] $($lines)* ,);
    };
}

/// The `clap::ValueEnum` of a generated `PolicyName`, with the `clap`
/// feature of this crate (the expansion happens in the caller, so the
/// feature is tested here, where the macro is defined).
#[cfg(feature = "clap")]
#[macro_export]
#[doc(hidden)]
macro_rules! __policy_value_enum {
    ($name:ident) => {
        impl $crate::__clap::ValueEnum for $name {
            fn value_variants<'a>() -> &'a [Self] {
                &$name::ALL
            }

            fn to_possible_value(&self) -> Option<$crate::__clap::builder::PossibleValue> {
                Some($crate::__clap::builder::PossibleValue::new(self.name()))
            }
        }
    };
}

/// Without the `clap` feature: nothing.
#[cfg(not(feature = "clap"))]
#[macro_export]
#[doc(hidden)]
macro_rules! __policy_value_enum {
    ($name:ident) => {};
}
