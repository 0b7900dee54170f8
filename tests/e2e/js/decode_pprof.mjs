// Decodes a gzipped pprof file with pprof-format (Datadog's decoder, which
// shares no code with pystrobe's protobuf classes) and prints what it holds
// as one JSON object, names resolved:
//   {sampleTypes: [[type, unit]...], periodType, period, defaultSampleType,
//    timeNanos, durationNanos, comments, errors: [...],
//    mappings: [{id, filename, buildId, memoryStart, memoryLimit, fileOffset,
//                hasFunctions}],
//    samples: [{stack: [{name, file, line, mapping, mappingId, address}] leaf
//               first, values, labels}]}
// Addresses and mapping bounds are hex strings ("0x41f000"): uint64 values
// need not fit a JSON number.
// `errors` lists broken invariants (dangling ids, a non-empty string 0, an
// address outside its mapping...).
//
// usage: node decode_pprof.mjs FILE.pb.gz
import {readFileSync} from 'node:fs';
import {gunzipSync} from 'node:zlib';

import {Profile} from 'pprof-format';

const path = process.argv[2];
if (!path) {
  console.error('usage: node decode_pprof.mjs FILE.pb.gz');
  process.exit(2);
}
const profile = Profile.decode(gunzipSync(readFileSync(path)));
const strings = profile.stringTable.strings;
const errors = [];
const num = (n) => Number(n);  // int64 fields may come back as BigInt
const hex = (n) => '0x' + BigInt(n).toString(16);
const str = (index) => {
  const i = num(index);
  if (!(i >= 0 && i < strings.length)) {
    errors.push(`string index ${i} out of range (${strings.length} strings)`);
    return undefined;
  }
  return strings[i];
};

if (strings.length === 0 || strings[0] !== '') errors.push('string_table[0] is not ""');

function byId(list, what) {
  const map = new Map();
  for (const item of list) {
    const id = num(item.id);
    if (id === 0) errors.push(`${what} with id 0`);
    if (map.has(id)) errors.push(`duplicate ${what} id ${id}`);
    map.set(id, item);
  }
  return map;
}
const mappings = byId(profile.mapping, 'mapping');
const functions = byId(profile.function, 'function');
const locations = byId(profile.location, 'location');

function frame(locationId) {
  const location = locations.get(num(locationId));
  if (!location) {
    errors.push(`sample refers to missing location ${locationId}`);
    return {name: '<missing>'};
  }
  const mappingId = num(location.mappingId);
  const mapping = mappings.get(mappingId);
  if (mappingId !== 0 && !mapping) {
    errors.push(`location ${location.id} refers to missing mapping ${mappingId}`);
  }
  if (mapping && BigInt(mapping.memoryLimit) !== 0n &&
      (BigInt(location.address) < BigInt(mapping.memoryStart) ||
       BigInt(location.address) >= BigInt(mapping.memoryLimit))) {
    errors.push(`location ${location.id} at ${hex(location.address)} is outside mapping ${mappingId}`);
  }
  if (location.line.length !== 1) errors.push(`location ${location.id} has ${location.line.length} lines`);
  const line = location.line[0];
  const fn = line && functions.get(num(line.functionId));
  if (!fn) {
    errors.push(`location ${location.id} refers to a missing function`);
    return {name: '<missing>'};
  }
  return {
    name: str(fn.name),
    file: str(fn.filename),
    line: num(line.line),
    mapping: mappingId !== 0 ? str(mapping?.filename ?? 0) : '',
    mappingId,
    address: hex(location.address),
  };
}

const samples = profile.sample.map((sample) => {
  if (sample.value.length !== profile.sampleType.length) {
    errors.push(`a sample has ${sample.value.length} values for ${profile.sampleType.length} types`);
  }
  const labels = {};
  for (const label of sample.label) {
    labels[str(label.key)] = num(label.str) !== 0 ? str(label.str) : num(label.num);
  }
  return {
    stack: sample.locationId.map(frame),
    values: sample.value.map(num),
    labels,
  };
});

console.log(JSON.stringify({
  sampleTypes: profile.sampleType.map((t) => [str(t.type), str(t.unit)]),
  periodType: profile.periodType ? [str(profile.periodType.type), str(profile.periodType.unit)] : null,
  period: num(profile.period),
  defaultSampleType: str(profile.defaultSampleType),
  timeNanos: String(profile.timeNanos),
  durationNanos: String(profile.durationNanos),
  comments: profile.comment.map(str),
  mappings: profile.mapping.map((m) => ({
    id: num(m.id),
    filename: str(m.filename),
    buildId: str(m.buildId),
    memoryStart: hex(m.memoryStart),
    memoryLimit: hex(m.memoryLimit),
    fileOffset: hex(m.fileOffset),
    hasFunctions: Boolean(m.hasFunctions),
  })),
  errors,
  samples,
}));
