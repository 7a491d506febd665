import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import * as dagCbor from '@ipld/dag-cbor';

it('loads the ESM-only packages', async () => {
  const car = await import('@ipld/car');
  expect(typeof car.CarWriter).toBe('function');
  const h = await sha256.digest(dagCbor.encode({ a: 1 }));
  expect(CID.create(1, dagCbor.code, h).toString()).toBe('bafyreihltcnuuyqp2jm24aqydpnlj7b6w3ogwrplomrjtg5rifv44mmjey');
});
