/**
 * The cluster's shape on loopback, and the configuration files it implies: etcd's command line, one Patroni
 * YAML per member, HAProxy's routing to whichever member answers Patroni's `GET /primary` with 200. Pure
 * functions of the ports and directories, so the files can be read (and tested) without starting anything.
 */
import { join } from "node:path"

/** One Patroni member: its PostgreSQL port, its REST port, its directory. */
export interface Member {
  readonly name: string
  readonly pgPort: number
  readonly restPort: number
  readonly directory: string
}

/** The whole cluster on loopback. */
export interface Topology {
  readonly directory: string
  readonly etcdClientPort: number
  readonly etcdPeerPort: number
  readonly haproxyPort: number
  readonly members: ReadonlyArray<Member>
  /** Patroni's `synchronous_mode`: a commit is acknowledged only once the synchronous standby has it. */
  readonly synchronousMode: boolean
  /** Patroni's `synchronous_mode_strict`: with no synchronous standby, writes wait rather than go on alone. */
  readonly synchronousModeStrict: boolean
  /** PostgreSQL's server binaries. */
  readonly postgresBin: string
}

/** Patroni's scope (cluster name) and the superuser the apps connect as (loopback, `trust`). */
export const scope = "failover-lab"
export const superuser = { username: "postgres", password: "failover-lab" } as const

/**
 * Patroni's timing: the leader key lives `ttl` seconds, members run their loop every `loopWait` seconds; a
 * crashed primary is failed over at once (`primary_start_timeout` 0) rather than restarted in place.
 */
export const timing = { ttl: 10, loopWait: 1, retryTimeout: 4, primaryStartTimeout: 0 } as const

/** A member's data directory. */
export const dataDirectory = (member: Member): string => join(member.directory, "data")

/** A member's Patroni configuration file. */
export const configFile = (member: Member): string => join(member.directory, "patroni.yml")

/** The URL of the database through HAProxy: always the current leader, or refused while there is none. */
export const routedUrl = (haproxyPort: number): string =>
  `postgres://${superuser.username}:${superuser.password}@127.0.0.1:${haproxyPort}/postgres`

/** etcd's arguments: a single node on loopback, data in the lab's directory. */
export const etcdArgs = (topology: Topology): ReadonlyArray<string> => {
  const peer = `http://127.0.0.1:${topology.etcdPeerPort}`
  const client = `http://127.0.0.1:${topology.etcdClientPort}`
  return [
    "--name=lab",
    `--data-dir=${join(topology.directory, "etcd")}`,
    `--listen-client-urls=${client}`,
    `--advertise-client-urls=${client}`,
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=lab=${peer}`
  ]
}

/**
 * One member's Patroni configuration (JSON, which YAML reads as it is). The bootstrap part is the cluster's
 * dynamic configuration in etcd; the first member to start initialises it.
 */
export const patroniConfig = (topology: Topology, member: Member): string =>
  JSON.stringify(
    {
      scope,
      namespace: "/resilience/",
      name: member.name,
      log: { level: "INFO" },
      restapi: { listen: `127.0.0.1:${member.restPort}`, connect_address: `127.0.0.1:${member.restPort}` },
      etcd3: { hosts: `127.0.0.1:${topology.etcdClientPort}` },
      bootstrap: {
        dcs: {
          ttl: timing.ttl,
          loop_wait: timing.loopWait,
          retry_timeout: timing.retryTimeout,
          primary_start_timeout: timing.primaryStartTimeout,
          maximum_lag_on_failover: 1048576,
          synchronous_mode: topology.synchronousMode,
          synchronous_mode_strict: topology.synchronousModeStrict,
          postgresql: {
            use_pg_rewind: true,
            use_slots: true,
            parameters: {
              max_connections: 100,
              wal_log_hints: "on",
              max_wal_senders: 5,
              max_replication_slots: 5,
              wal_keep_size: "128MB"
            }
          }
        },
        initdb: [{ encoding: "UTF8" }, { "auth-local": "trust" }, { "auth-host": "trust" }, "no-sync"],
        pg_hba: [
          "local all all trust",
          "host replication replicator 127.0.0.1/32 trust",
          "host all all 127.0.0.1/32 trust"
        ]
      },
      postgresql: {
        listen: `127.0.0.1:${member.pgPort}`,
        connect_address: `127.0.0.1:${member.pgPort}`,
        data_dir: dataDirectory(member),
        bin_dir: topology.postgresBin,
        pgpass: join(member.directory, "pgpass"),
        authentication: {
          replication: { username: "replicator", password: "replicator" },
          superuser,
          rewind: superuser
        },
        basebackup: [{ checkpoint: "fast" }, "no-sync"],
        // fsync off: the faults here kill processes, not the machine, so nothing the OS holds is lost; commits
        // still wait for the synchronous standby when synchronous_mode is on (synchronous_commit stays on)
        parameters: { unix_socket_directories: member.directory, shared_buffers: "32MB", fsync: "off" }
      },
      tags: { nofailover: false, noloadbalance: false, clonefrom: false, nosync: false }
    },
    null,
    2
  )

/**
 * HAProxy's configuration: one TCP listener that sends every connection to the member whose Patroni answers
 * `GET /primary` with 200, checked every 250 ms; a member marked down has its sessions cut at once, so no
 * client stays on a demoted primary.
 */
export const haproxyConfig = (topology: Topology): string =>
  [
    "global",
    "  maxconn 1000",
    "defaults",
    "  mode tcp",
    "  timeout connect 1s",
    "  timeout client 10m",
    "  timeout server 10m",
    "  timeout check 1s",
    "listen primary",
    `  bind 127.0.0.1:${topology.haproxyPort}`,
    "  option httpchk GET /primary",
    "  http-check expect status 200",
    "  default-server inter 250ms fall 2 rise 1 on-marked-down shutdown-sessions",
    ...topology.members.map((member) =>
      `  server ${member.name} 127.0.0.1:${member.pgPort} maxconn 200 check port ${member.restPort}`
    ),
    ""
  ].join("\n")
