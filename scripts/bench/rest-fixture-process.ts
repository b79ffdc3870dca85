// The REST fixture (test/fixtures/rest-server.ts) as a process of its own, for benchmarks: prints
// its URL on stdout and serves until killed.
import { startRestFixture } from "../../test/fixtures/rest-server.ts";

const fixture = startRestFixture();
// Only the benchmark's calls are kept from growing without bound: the log is not read here.
setInterval(() => fixture.seen.splice(0), 1000);
process.stdout.write(`${fixture.url}\n`);
