//! The agent's logic against stand-in switches (no root): each fake switch
//! serves a real control socket, reports the link state the test sets and
//! records the tables pushed to it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lcmp_agent::failover::TableOptions;
use lcmp_agent::run::{Agent, RunOptions};
use lcmp_control::proto::{Applied, LinkStateReply, PortLink, RouteSpec};
use lcmp_control::server::{serve, Inbox};
use lcmp_control::{Body, Reply, Request};

/// What a fake switch shows and what it was told.
#[derive(Default)]
struct FakeState {
    /// Per port: up.
    up: Vec<bool>,
    /// Every table pushed, in order.
    pushed: Vec<Vec<RouteSpec>>,
    /// The tables in force (a push of the same ones changes nothing).
    current: Option<Vec<RouteSpec>>,
    /// Answer nothing (a switch that is restarting): requests get the
    /// server's error.
    silent: bool,
}

struct Fakes {
    dir: PathBuf,
    stop: Arc<AtomicBool>,
    switches: BTreeMap<String, Arc<Mutex<FakeState>>>,
}

impl Fakes {
    /// One fake per switch of `topology`, with `ports[name]` ports each.
    fn start(tag: &str, ports: &[(&str, usize)]) -> Fakes {
        let dir = std::env::temp_dir().join(format!("lcmp-agent-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let mut switches = BTreeMap::new();
        for (name, n) in ports {
            let state = Arc::new(Mutex::new(FakeState {
                up: vec![true; *n],
                ..Default::default()
            }));
            let inbox = Inbox::new().unwrap();
            serve(&dir.join(format!("{name}.sock")), &inbox).unwrap();
            let (st, stop2, sw) = (state.clone(), stop.clone(), name.to_string());
            std::thread::spawn(move || {
                while !stop2.load(Ordering::Relaxed) {
                    while let Some(p) = inbox.take() {
                        let mut s = st.lock().unwrap();
                        if s.silent {
                            // Dropped unanswered: the server tells the
                            // client the switch did not answer.
                            drop(p);
                            continue;
                        }
                        let reply = match &p.request {
                            Request::LinkState => Reply::LinkState(LinkStateReply {
                                switch: sw.clone(),
                                table_generation: 1,
                                ports: s
                                    .up
                                    .iter()
                                    .enumerate()
                                    .map(|(i, up)| PortLink {
                                        index: i as u32,
                                        name: format!("p{i}"),
                                        up: *up,
                                        link_up: *up,
                                        admin_up: true,
                                    })
                                    .collect(),
                            }),
                            Request::ReplaceTables { routes } => {
                                let changed = s.current.as_ref() != Some(routes);
                                s.pushed.push(routes.clone());
                                s.current = Some(routes.clone());
                                Reply::Applied(Applied {
                                    message: "tables".into(),
                                    changed,
                                    flows_to_move: 0,
                                })
                            }
                            _ => Reply::Applied(Applied {
                                message: "ok".into(),
                                changed: false,
                                flows_to_move: 0,
                            }),
                        };
                        p.answer(Body::Ok(Box::new(reply)));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
            switches.insert(name.to_string(), state);
        }
        Fakes {
            dir,
            stop,
            switches,
        }
    }

    fn state(&self, sw: &str) -> std::sync::MutexGuard<'_, FakeState> {
        self.switches[sw].lock().unwrap()
    }

    /// The candidate ports of `sw`'s last pushed route to `prefix`.
    fn candidates(&self, sw: &str, prefix: &str) -> Vec<u32> {
        let s = self.state(sw);
        let routes = s.current.as_ref().expect("tables pushed");
        routes
            .iter()
            .find(|r| r.prefix == prefix)
            .map(|r| r.candidates.iter().map(|c| c.port).collect())
            .unwrap_or_default()
    }
}

impl Drop for Fakes {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn agent(fakes: &Fakes) -> Agent {
    Agent::new(RunOptions {
        topology: PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topologies/2dc-3path.toml"
        )),
        socket_dir: fakes.dir.clone(),
        metrics_listen: None,
        watch_interval: Duration::from_millis(20),
        tables: TableOptions::default(),
        state_file: None,
        host_netns_prefix: None,
        timeout: Duration::from_secs(2),
        scaling: lcmp_topology::Scaling::NONE,
    })
    .expect("agent starts")
}

/// 2dc-3path: s1 and s2 have 4 ports (3 paths + host), p1..p3 two.
const PORTS: [(&str, usize); 5] = [("s1", 4), ("s2", 4), ("p1", 2), ("p2", 2), ("p3", 2)];

#[test]
fn a_far_link_down_is_taken_out_of_every_switch_and_put_back() {
    let fakes = Fakes::start("far", &PORTS);
    let mut a = agent(&fakes);
    a.adopt();
    assert_eq!(fakes.candidates("s1", "10.0.2.0/24"), vec![0, 1, 2]);
    assert_eq!(fakes.candidates("s2", "10.0.1.0/24"), vec![0, 1, 2]);
    // p1's port towards s2 (port 1) loses its carrier.
    fakes.state("p1").up[1] = false;
    let (down, up) = a.watch();
    assert_eq!(
        (down, up),
        (vec!["p1-s2".to_string()], Vec::<String>::new())
    );
    assert_eq!(fakes.candidates("s1", "10.0.2.0/24"), vec![1, 2]);
    assert_eq!(fakes.candidates("s2", "10.0.1.0/24"), vec![1, 2]);
    // Nothing changes while nothing changes.
    let pushes = fakes.state("s1").pushed.len();
    assert_eq!(a.watch(), (vec![], vec![]));
    assert_eq!(fakes.state("s1").pushed.len(), pushes);
    // The link returns.
    fakes.state("p1").up[1] = true;
    let (down, up) = a.watch();
    assert_eq!(
        (down, up),
        (Vec::<String>::new(), vec!["p1-s2".to_string()])
    );
    assert_eq!(fakes.candidates("s1", "10.0.2.0/24"), vec![0, 1, 2]);
}

#[test]
fn a_restarted_agent_adopts_without_changing_tables() {
    let fakes = Fakes::start("adopt", &PORTS);
    let mut first = agent(&fakes);
    first.adopt();
    let pushes: Vec<usize> = PORTS
        .iter()
        .map(|(s, _)| fakes.state(s).pushed.len())
        .collect();
    drop(first);
    let mut second = agent(&fakes);
    second.adopt();
    for ((s, _), before) in PORTS.iter().zip(pushes) {
        let st = fakes.state(s);
        assert_eq!(st.pushed.len(), before + 1, "{s} asked once more");
        let n = st.pushed.len();
        assert_eq!(st.pushed[n - 1], st.pushed[n - 2], "{s}: same tables");
    }
}

#[test]
fn a_switch_that_comes_back_gets_its_tables_again() {
    let fakes = Fakes::start("back", &PORTS);
    let mut a = agent(&fakes);
    a.adopt();
    // s1 stops answering (it restarts)...
    fakes.state("s1").silent = true;
    a.watch();
    let before = fakes.state("s1").pushed.len();
    // ...and answers again, perhaps with the tables it computed at start:
    // it is given the agent's at the next watch.
    fakes.state("s1").silent = false;
    a.watch();
    assert_eq!(fakes.state("s1").pushed.len(), before + 1);
    // The others were not bothered.
    assert_eq!(fakes.state("s2").pushed.len(), 1);
}
