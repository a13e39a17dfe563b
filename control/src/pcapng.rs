//! The one pcapng writer: a port's frames as `lcmp-ctl capture` and the
//! one-process engines' captures write them (tcpdump, Wireshark). One
//! interface, Ethernet, named `<switch>/<port>`; nanosecond timestamps;
//! each frame's direction in its EPB flags (inbound: received on the port;
//! outbound: leaving by it).

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::time::Duration;

use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;

/// EPB flags: direction inbound (bits 0-1 = 01) and outbound (10).
const INBOUND: u32 = 1;
const OUTBOUND: u32 = 2;

/// A pcapng file being written.
pub struct PcapngFile {
    writer: PcapNgWriter<BufWriter<File>>,
}

fn failed(e: pcap_file::PcapError) -> io::Error {
    io::Error::other(e.to_string())
}

impl PcapngFile {
    /// Starts `file` (created by the caller, so that a bad path fails
    /// before anything else is done): its section header and the one
    /// interface, `if_name`, keeping `snaplen` bytes a frame.
    pub fn new(file: File, if_name: &str, snaplen: u32) -> io::Result<PcapngFile> {
        let mut writer = PcapNgWriter::new(BufWriter::new(file)).map_err(failed)?;
        writer
            .write_pcapng_block(InterfaceDescriptionBlock {
                linktype: DataLink::ETHERNET,
                snaplen,
                options: vec![
                    InterfaceDescriptionOption::IfName(Cow::Owned(if_name.to_string())),
                    // Nanosecond timestamps (pcap-file writes them so).
                    InterfaceDescriptionOption::IfTsResol(9),
                ],
            })
            .map_err(failed)?;
        Ok(PcapngFile { writer })
    }

    /// Appends a frame seen at `time_ns` (ns since the clock's origin: the
    /// Unix epoch for a switch on the wall clock, the run's start on a
    /// one-process engine), `orig_len` bytes long, of which `data` was
    /// kept.
    pub fn write(
        &mut self,
        time_ns: u64,
        outbound: bool,
        orig_len: u32,
        data: &[u8],
    ) -> io::Result<()> {
        // A frame is at least as long as the bytes kept of it.
        let original_len = orig_len.max(u32::try_from(data.len()).unwrap_or(u32::MAX));
        self.writer
            .write_pcapng_block(EnhancedPacketBlock {
                interface_id: 0,
                timestamp: Duration::from_nanos(time_ns),
                original_len,
                data: Cow::Borrowed(data),
                options: vec![EnhancedPacketOption::Flags(if outbound {
                    OUTBOUND
                } else {
                    INBOUND
                })],
            })
            .map_err(failed)?;
        Ok(())
    }

    /// Flushes what was written.
    pub fn finish(mut self) -> io::Result<()> {
        self.writer.get_mut().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_file::pcapng::{Block, PcapNgReader};

    #[test]
    fn frames_read_back_with_their_times_directions_and_lengths() {
        let path = std::env::temp_dir().join(format!("lcmp-pcapng-{}.pcapng", std::process::id()));
        let mut f = PcapngFile::new(File::create(&path).unwrap(), "s1/p3", 64).unwrap();
        f.write(1_000_000_007, false, 1074, &[1; 64]).unwrap();
        f.write(1_000_000_900, true, 62, &[2; 62]).unwrap();
        f.finish().unwrap();
        let mut r = PcapNgReader::new(File::open(&path).unwrap()).unwrap();
        let mut seen = Vec::new();
        while let Some(b) = r.next_block() {
            match b.unwrap() {
                Block::InterfaceDescription(i) => assert_eq!(i.snaplen, 64),
                Block::EnhancedPacket(p) => {
                    let flags: Vec<u32> = p
                        .options
                        .iter()
                        .filter_map(|o| match o {
                            EnhancedPacketOption::Flags(f) => Some(*f),
                            _ => None,
                        })
                        .collect();
                    seen.push((p.timestamp.as_nanos(), p.original_len, p.data.len(), flags));
                }
                _ => {}
            }
        }
        let _ = std::fs::remove_file(&path);
        assert_eq!(
            seen,
            [
                (1_000_000_007, 1074, 64, vec![INBOUND]),
                (1_000_000_900, 62, 62, vec![OUTBOUND]),
            ]
        );
    }
}
