//! Whether orch can confine processes on this machine, and why not.

use serde::Serialize;

use crate::model::ConfinementMode;

/// The lowest Landlock ABI orch confines with: ABI 3 (Linux 6.2) is the
/// first that can stop a process truncating files it may not write.
pub(crate) const MIN_ABI: u32 = 3;

/// Whether confinement is there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Availability {
    /// Landlock works; the kernel's ABI version.
    Available { abi: u32 },
    /// The OS cannot confine here, and why.
    Unavailable { reason: String },
    /// `confinement = "off"` in the settings.
    Off,
}

impl Availability {
    /// Ask the kernel (unless the settings turned confinement off).
    pub fn detect(mode: ConfinementMode) -> Self {
        if mode == ConfinementMode::Off {
            return Availability::Off;
        }
        Self::from_kernel(kernel_abi())
    }

    /// The verdict for what the kernel answered: its ABI, or an errno.
    pub(crate) fn from_kernel(answer: Result<u32, i32>) -> Self {
        match answer {
            Ok(abi) if abi >= MIN_ABI => Availability::Available { abi },
            Ok(abi) => Availability::Unavailable {
                reason: format!(
                    "the kernel's Landlock is ABI {abi}; orch needs ABI {MIN_ABI} (Linux 6.2) to stop files being truncated"
                ),
            },
            Err(errno) if errno == libc_enosys() => Availability::Unavailable {
                reason: "the kernel has no Landlock (Linux 5.13 or newer built with CONFIG_SECURITY_LANDLOCK)".into(),
            },
            Err(errno) if errno == libc_eopnotsupp() => Availability::Unavailable {
                reason: "Landlock is disabled in this kernel (add `landlock` to the `lsm=` boot parameter)".into(),
            },
            Err(errno) => Availability::Unavailable {
                reason: format!("Landlock answered error {errno}"),
            },
        }
    }

    pub(crate) fn abi(&self) -> Option<u32> {
        match self {
            Availability::Available { abi } => Some(*abi),
            _ => None,
        }
    }

    pub(crate) fn is_available(&self) -> bool {
        self.abi().is_some()
    }

    /// One line for people: what confines, or why nothing does.
    pub(crate) fn describe(&self) -> String {
        match self {
            Availability::Available { abi } => format!("Landlock ABI {abi}"),
            Availability::Unavailable { reason } => format!("not available: {reason}"),
            Availability::Off => "off (`confinement = \"off\"` in the settings)".into(),
        }
    }
}

#[cfg(target_os = "linux")]
fn kernel_abi() -> Result<u32, i32> {
    super::landlock::kernel_abi()
}

#[cfg(not(target_os = "linux"))]
fn kernel_abi() -> Result<u32, i32> {
    Err(-1)
}

#[cfg(target_os = "linux")]
fn libc_enosys() -> i32 {
    libc::ENOSYS
}

#[cfg(target_os = "linux")]
fn libc_eopnotsupp() -> i32 {
    libc::EOPNOTSUPP
}

#[cfg(not(target_os = "linux"))]
fn libc_enosys() -> i32 {
    -1
}

#[cfg(not(target_os = "linux"))]
fn libc_eopnotsupp() -> i32 {
    -2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fallback_decision() {
        assert_eq!(
            Availability::from_kernel(Ok(7)),
            Availability::Available { abi: 7 }
        );
        assert_eq!(
            Availability::from_kernel(Ok(3)),
            Availability::Available { abi: 3 }
        );
        for (answer, says) in [
            (Ok(2), "ABI 2"),
            (Err(libc_enosys()), "has no Landlock"),
            (Err(libc_eopnotsupp()), "disabled"),
        ] {
            let a = Availability::from_kernel(answer);
            assert!(!a.is_available());
            assert!(a.describe().contains(says), "{}", a.describe());
        }
        assert_eq!(
            Availability::detect(ConfinementMode::Off),
            Availability::Off
        );
        assert!(
            Availability::Off
                .describe()
                .contains("confinement = \"off\"")
        );
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn this_kernel_answers() {
        // Whatever it says, asking never fails or panics.
        let a = Availability::detect(ConfinementMode::Auto);
        assert!(!a.describe().is_empty());
    }
}
