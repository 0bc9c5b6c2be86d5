//! What a plugin holds before its first instruction runs: the initial sizes of the memories and
//! tables its core instances create when the component is instantiated, read from the bytes.
//!
//! Every call's instantiation takes that much out of the call's budget (`maxMemory`,
//! `maxTableElements`), and the sandbox pool refuses a component with one memory or table larger
//! than its slots. A plugin whose start does not fit is refused before it is compiled, with the
//! minimum it needs: compiling it (tens of seconds for an interpreter's component) could only end
//! in the same refusal, and a cached compilation of it is not touched, since it is valid for any
//! larger limit.

use wasmparser::{
    BinaryReaderError, ComponentAlias, ComponentExternalKind, ComponentInstance,
    ComponentOuterAliasKind, ComponentTypeRef, Encoding, Instance, Parser, Payload,
};

use super::limits::SandboxLimits;

const MIB: u64 = 1 << 20;
/// A wasm page, unless the memory declares a custom page size.
const DEFAULT_PAGE_SIZE_LOG2: u32 = 16;

/// What instantiating a component creates, all its core instances together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StartFootprint {
    /// Bytes of linear memory: the initial sizes of every memory created.
    pub memory_bytes: u64,
    /// Elements of every table created, at their initial sizes.
    pub table_elements: u64,
}

/// A limit a plugin's start does not fit in, with the least that would do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitTooSmall {
    #[error(
        "it needs at least {needed_mib} MiB of linear memory to start (the initial sizes of the \
         memories its core instances create, together), more than maxMemory ({allowed}) allows: \
         give it maxMemory: {needed_mib}Mi or more (policy.limits.maxMemory, or its \
         policy.pluginLimits entry; --max-memory for orca plugin eval and bench)",
        allowed = mib_text(*.allowed_bytes)
    )]
    Memory { needed_mib: u64, allowed_bytes: u64 },
    #[error(
        "it needs at least {needed} table elements to start (the initial sizes of the tables its \
         core instances create, together), more than maxTableElements ({allowed}) allows: give \
         it maxTableElements: {needed} or more (policy.limits.maxTableElements, or its \
         policy.pluginLimits entry)"
    )]
    TableElements { needed: u64, allowed: u64 },
}

impl StartFootprint {
    /// The footprint of the component (or core module) in `bytes`. `None` when the bytes do
    /// not parse: compiling them says why, better than a footprint could.
    ///
    /// # Caveats
    /// A lower bound: a module or component that comes from an import or from another
    /// instance's export counts as creating nothing, and what a start function grows is not
    /// seen. Only instantiations written in the component count, each as often as it happens.
    pub fn of(bytes: &[u8]) -> Option<StartFootprint> {
        let mut walk = Walk::default();
        for payload in Parser::new(0).parse_all(bytes) {
            if let Some(done) = payload.and_then(|p| walk.step(p)).ok()? {
                return Some(done);
            }
        }
        None
    }

    /// Whether a call with `limits` can instantiate the plugin: the first limit it does not fit
    /// in, memory first.
    ///
    /// # Errors
    /// [`LimitTooSmall`] naming the minimum (memory in MiB, rounded up).
    pub fn fits(&self, limits: &SandboxLimits) -> Result<(), LimitTooSmall> {
        let allowed_bytes = u64::try_from(limits.max_memory_bytes).unwrap_or(u64::MAX);
        if self.memory_bytes > allowed_bytes {
            return Err(LimitTooSmall::Memory {
                needed_mib: self.memory_bytes.div_ceil(MIB),
                allowed_bytes,
            });
        }
        let allowed = u64::try_from(limits.max_table_elements).unwrap_or(u64::MAX);
        if self.table_elements > allowed {
            return Err(LimitTooSmall::TableElements {
                needed: self.table_elements,
                allowed,
            });
        }
        Ok(())
    }

    fn add(&mut self, other: StartFootprint) {
        self.memory_bytes = self.memory_bytes.saturating_add(other.memory_bytes);
        self.table_elements = self.table_elements.saturating_add(other.table_elements);
    }
}

/// `64 MiB`, `1.5 MiB`: a limit as people wrote it.
fn mib_text(bytes: u64) -> String {
    if bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{:.1} MiB", bytes as f64 / MIB as f64)
    }
}

/// One component's index spaces, as far as instantiations need them: what instantiating each
/// of its core modules and components creates (nothing, when it is not known).
#[derive(Default)]
struct Scope {
    modules: Vec<StartFootprint>,
    components: Vec<StartFootprint>,
    /// What instantiating this component creates, so far.
    started: StartFootprint,
}

/// The entry at `index` of an index space; nothing known for one out of range (the compile
/// refuses such bytes).
fn entry(space: &[StartFootprint], index: u32) -> StartFootprint {
    usize::try_from(index)
        .ok()
        .and_then(|index| space.get(index))
        .copied()
        .unwrap_or_default()
}

/// A core module being read, or a component.
enum Frame {
    Module(StartFootprint),
    Component(Scope),
}

/// The nesting of modules and components the parser is in (it yields nested ones inline,
/// from their `Version` to their `End`).
#[derive(Default)]
struct Walk {
    frames: Vec<Frame>,
}

impl Walk {
    /// Reads one payload; the footprint once the outermost module or component ends.
    fn step(&mut self, payload: Payload<'_>) -> Result<Option<StartFootprint>, BinaryReaderError> {
        match payload {
            Payload::Version { encoding, .. } => self.frames.push(match encoding {
                Encoding::Module => Frame::Module(StartFootprint::default()),
                Encoding::Component => Frame::Component(Scope::default()),
            }),
            Payload::End(_) => return Ok(self.end()),
            Payload::ComponentAliasSection(reader) => {
                for alias in reader {
                    let added = self.alias_entry(&alias?);
                    if let (Some((is_module, footprint)), Some(Frame::Component(scope))) =
                        (added, self.frames.last_mut())
                    {
                        let space = if is_module {
                            &mut scope.modules
                        } else {
                            &mut scope.components
                        };
                        space.push(footprint);
                    }
                }
            }
            payload => match self.frames.last_mut() {
                Some(Frame::Module(footprint)) => read_module(footprint, payload)?,
                Some(Frame::Component(scope)) => read_component(scope, payload)?,
                None => {}
            },
        }
        Ok(None)
    }

    /// Closes the innermost frame: it becomes an entry of its parent's index space, or the
    /// answer when it is the outermost. A module alone counts as instantiated once.
    fn end(&mut self) -> Option<StartFootprint> {
        let (footprint, is_module) = match self.frames.pop()? {
            Frame::Module(footprint) => (footprint, true),
            Frame::Component(scope) => (scope.started, false),
        };
        let Some(Frame::Component(parent)) = self.frames.last_mut() else {
            return Some(footprint);
        };
        if is_module {
            parent.modules.push(footprint);
        } else {
            parent.components.push(footprint);
        }
        None
    }

    /// The entry an alias adds to the current component: whether to its modules (else to its
    /// components), and what instantiating it creates. An outer alias copies an enclosing
    /// component's entry (count 0 is the current component); one of an instance's exports is
    /// not known.
    fn alias_entry(&self, alias: &ComponentAlias<'_>) -> Option<(bool, StartFootprint)> {
        let outer = |count: u32| {
            self.frames
                .iter()
                .rev()
                .filter_map(|frame| match frame {
                    Frame::Component(scope) => Some(scope),
                    Frame::Module(_) => None,
                })
                .nth(usize::try_from(count).ok()?)
        };
        match *alias {
            ComponentAlias::Outer {
                kind: ComponentOuterAliasKind::CoreModule,
                count,
                index,
            } => Some((
                true,
                outer(count).map_or_else(Default::default, |s| entry(&s.modules, index)),
            )),
            ComponentAlias::Outer {
                kind: ComponentOuterAliasKind::Component,
                count,
                index,
            } => Some((
                false,
                outer(count).map_or_else(Default::default, |s| entry(&s.components, index)),
            )),
            ComponentAlias::InstanceExport {
                kind: ComponentExternalKind::Module,
                ..
            } => Some((true, StartFootprint::default())),
            ComponentAlias::InstanceExport {
                kind: ComponentExternalKind::Component,
                ..
            } => Some((false, StartFootprint::default())),
            _ => None,
        }
    }
}

/// Adds what a component section instantiates, imports or exports to `scope`.
fn read_component(scope: &mut Scope, payload: Payload<'_>) -> Result<(), BinaryReaderError> {
    match payload {
        Payload::InstanceSection(reader) => {
            for instance in reader {
                if let Instance::Instantiate { module_index, .. } = instance? {
                    scope.started.add(entry(&scope.modules, module_index));
                }
            }
        }
        Payload::ComponentInstanceSection(reader) => {
            for instance in reader {
                if let ComponentInstance::Instantiate {
                    component_index, ..
                } = instance?
                {
                    scope.started.add(entry(&scope.components, component_index));
                }
            }
        }
        Payload::ComponentImportSection(reader) => {
            for import in reader {
                match import?.ty {
                    ComponentTypeRef::Module(_) => scope.modules.push(StartFootprint::default()),
                    ComponentTypeRef::Component(_) => {
                        scope.components.push(StartFootprint::default());
                    }
                    _ => {}
                }
            }
        }
        // An export is a new index of what it exports.
        Payload::ComponentExportSection(reader) => {
            for export in reader {
                let export = export?;
                match export.kind {
                    ComponentExternalKind::Module => {
                        scope.modules.push(entry(&scope.modules, export.index));
                    }
                    ComponentExternalKind::Component => {
                        scope
                            .components
                            .push(entry(&scope.components, export.index));
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Adds the memories and tables a core module defines (imported ones are another
/// instance's).
fn read_module(
    footprint: &mut StartFootprint,
    payload: Payload<'_>,
) -> Result<(), BinaryReaderError> {
    match payload {
        Payload::MemorySection(reader) => {
            for memory in reader {
                let memory = memory?;
                let page_log2 = memory.page_size_log2.unwrap_or(DEFAULT_PAGE_SIZE_LOG2);
                let bytes = memory
                    .initial
                    .checked_shl(page_log2)
                    .filter(|bytes| bytes >> page_log2 == memory.initial)
                    .unwrap_or(u64::MAX);
                footprint.add(StartFootprint {
                    memory_bytes: bytes,
                    table_elements: 0,
                });
            }
        }
        Payload::TableSection(reader) => {
            for table in reader {
                footprint.add(StartFootprint {
                    memory_bytes: 0,
                    table_elements: table?.ty.initial,
                });
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests;
