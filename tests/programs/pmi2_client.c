// A PMI-2 client, speaking the wire protocol on PMI_FD as MPICH's and MVAPICH's PMI-2 libraries
// do (Debian's MPICH speaks PMI-1 only, so it cannot test srun --mpi=pmi2): init, fullinit,
// job-getid, the process mapping, a node attribute shared by the ranks of each node, each rank's
// card through kvs-put, kvs-fence and kvs-get of every other rank's, spawn (refused), finalize.
// Prints one line per rank: "pmi2 rank R of N on NODE: cards N, node leader L, mapping M".
// With the argument "abort", rank 1 aborts after the fence while the others wait in a second
// fence, which srun must end; with "vanish", rank 1 exits before the fence the others wait in.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fd = -1;
static int rank = -1;

static void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "pmi2_client rank %d: ", rank);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(2);
}

static void write_all(const char* buf, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, buf, n);
    if (w <= 0) die("write to PMI_FD failed");
    buf += w;
    n -= (size_t)w;
  }
}

static void read_all(char* buf, size_t n) {
  while (n > 0) {
    ssize_t r = read(fd, buf, n);
    if (r <= 0) die("PMI_FD closed while reading an answer");
    buf += r;
    n -= (size_t)r;
  }
}

// Sends one PMI-2 message (MPICH's form: the length right-aligned in 6 characters).
static void send2(const char* fmt, ...) {
  char body[4096], msg[4200];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof body) die("message too long");
  snprintf(msg, sizeof msg, "%6d%s", n, body);
  write_all(msg, strlen(msg));
}

// Reads one PMI-2 answer into buf (NUL-terminated).
static void recv2(char* buf, size_t size) {
  char len[7] = {0};
  read_all(len, 6);
  char* end;
  long n = strtol(len, &end, 10);
  while (*end == ' ') ++end;
  if (*end != '\0' || n < 0 || (size_t)n >= size) die("bad answer length \"%s\"", len);
  read_all(buf, (size_t)n);
  buf[n] = '\0';
}

// The value of `key` in a "cmd=...;key=value;" answer, copied into out; 0 when absent.
static int field(const char* msg, const char* key, char* out, size_t size) {
  size_t klen = strlen(key);
  const char* p = msg;
  while (p && *p) {
    if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
      const char* v = p + klen + 1;
      size_t vlen = strcspn(v, ";");
      if (vlen >= size) vlen = size - 1;
      memcpy(out, v, vlen);
      out[vlen] = '\0';
      return 1;
    }
    p = strchr(p, ';');
    if (p) ++p;
  }
  return 0;
}

// Sends a request and reads its answer, which must be `expect` with rc=0.
static void call(char* answer, size_t size, const char* expect, const char* fmt, ...) {
  char body[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  send2("%s", body);
  recv2(answer, size);
  char cmd[128], rc[16];
  if (!field(answer, "cmd", cmd, sizeof cmd) || strcmp(cmd, expect) != 0) {
    die("sent %s, got %s", body, answer);
  }
  if (!field(answer, "rc", rc, sizeof rc) || strcmp(rc, "0") != 0)
    die("%s failed: %s", body, answer);
}

static int env_int(const char* name) {
  const char* v = getenv(name);
  if (!v || !*v) die("%s is not set", name);
  return atoi(v);
}

int main(int argc, char** argv) {
  fd = env_int("PMI_FD");
  rank = env_int("PMI_RANK");
  const int size = env_int("PMI_SIZE");
  const int local_id = env_int("SLURM_LOCALID");
  const char* jobid_env = getenv("PMI_JOBID");
  const char* node = getenv("SLURMD_NODENAME");
  char a[8192], v[4096];

  // The PMI-1 init line, as every PMI-2 client starts; the answer is a line too.
  const char* init = "cmd=init pmi_version=2 pmi_subversion=0\n";
  write_all(init, strlen(init));
  size_t n = 0;
  while (n + 1 < sizeof a) {
    read_all(a + n, 1);
    if (a[n++] == '\n') break;
  }
  a[n] = '\0';
  if (strcmp(a, "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n") != 0) {
    die("init answered %s", a);
  }
  if (!jobid_env) die("PMI_JOBID is not set");

  call(a, sizeof a, "fullinit-response", "cmd=fullinit;pmijobid=%s;pmirank=%d;threaded=FALSE;",
       jobid_env, rank);
  if (!field(a, "rank", v, sizeof v) || atoi(v) != rank) die("fullinit rank: %s", a);
  if (!field(a, "size", v, sizeof v) || atoi(v) != size) die("fullinit size: %s", a);
  if (field(a, "spawner-jobid", v, sizeof v)) die("not spawned, yet: %s", a);

  // "vanish": rank 1 leaves without a word; the others' fence must not wait for it forever.
  if (argc > 1 && strcmp(argv[1], "vanish") == 0 && rank == 1) return 0;

  call(a, sizeof a, "job-getid-response", "cmd=job-getid;");
  if (!field(a, "jobid", v, sizeof v) || strcmp(v, jobid_env) != 0) die("job-getid: %s", a);
  const char* jobid = jobid_env;

  char mapping[1024];
  call(a, sizeof a, "info-getjobattr-response", "cmd=info-getjobattr;key=PMI_process_mapping;");
  if (!field(a, "found", v, sizeof v) || strcmp(v, "TRUE") != 0 ||
      !field(a, "value", mapping, sizeof mapping)) {
    die("no PMI_process_mapping: %s", a);
  }

  // The first rank of each node puts its rank as a node attribute; the others wait for it.
  char leader[64];
  if (local_id == 0) {
    call(a, sizeof a, "info-putnodeattr-response", "cmd=info-putnodeattr;key=leader;value=%d;",
         rank);
    snprintf(leader, sizeof leader, "%d", rank);
  } else {
    call(a, sizeof a, "info-getnodeattr-response", "cmd=info-getnodeattr;key=leader;wait=TRUE;");
    if (!field(a, "found", v, sizeof v) || strcmp(v, "TRUE") != 0 ||
        !field(a, "value", leader, sizeof leader)) {
      die("node attribute: %s", a);
    }
    if (atoi(leader) != rank - local_id)
      die("leader %s for rank %d (local %d)", leader, rank, local_id);
  }

  call(a, sizeof a, "kvs-put-response", "cmd=kvs-put;key=card%d;value=card-of-%d-on-%s;", rank,
       rank, node ? node : "?");
  call(a, sizeof a, "kvs-fence-response", "cmd=kvs-fence;");
  int cards = 0;
  for (int r = 0; r < size; ++r) {
    call(a, sizeof a, "kvs-get-response", "cmd=kvs-get;jobid=%s;srcid=%d;key=card%d;", jobid, r, r);
    char want[128];
    snprintf(want, sizeof want, "card-of-%d-on-", r);
    if (!field(a, "found", v, sizeof v) || strcmp(v, "TRUE") != 0 ||
        !field(a, "value", v, sizeof v) || strncmp(v, want, strlen(want)) != 0) {
      die("card of rank %d: %s", r, a);
    }
    ++cards;
  }

  // Spawn is refused in words.
  send2("cmd=spawn;ncmds=1;preputcount=0;subcmd=true;maxprocs=1;argc=0;");
  recv2(a, sizeof a);
  if (!field(a, "rc", v, sizeof v) || strcmp(v, "0") == 0 || !strstr(a, "not supported")) {
    die("spawn: %s", a);
  }

  if (argc > 1 && strcmp(argv[1], "abort") == 0) {
    printf("pmi2 rank %d of %d on %s: before abort\n", rank, size, node ? node : "?");
    fflush(stdout);
    if (rank == 1) {
      send2("cmd=abort;isworld=TRUE;msg=rank 1 gives up;");
      sleep(30);  // srun ends the step; this rank must not end it by exiting
      return 3;
    }
    send2("cmd=kvs-fence;");  // never answered: rank 1 aborted
    recv2(a, sizeof a);
    die("a fence rank 1 never joined ended: %s", a);
  }

  call(a, sizeof a, "finalize-response", "cmd=finalize;");
  printf("pmi2 rank %d of %d on %s: cards %d, node leader %s, mapping %s\n", rank, size,
         node ? node : "?", cards, leader, mapping);
  return 0;
}
