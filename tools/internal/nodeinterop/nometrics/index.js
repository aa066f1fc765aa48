'use strict';
// tchannel 4.0.1 lists "metrics" as a dependency, but only its own tests and
// benchmarks require it; package.json's "overrides" puts this folder in its
// place so that the install needs no package the registry does not serve.
throw new Error('metrics is not installed: tchannel requires it only in its own tests and benchmarks');
