'use strict';
// tchannel 4.0.1 lists "metrics" as a dependency, but only its own tests and
// benchmarks require it, and the registry this project installs from does not
// serve it. package.json depends on this folder under that name and its
// "overrides" ("$metrics") gives tchannel the same, so the install needs no
// package the registry lacks. (An override naming "file:./nometrics" itself
// is recorded relative to tchannel's folder, and npm 10 then links nothing.)
throw new Error('metrics is not installed: tchannel requires it only in its own tests and benchmarks');
