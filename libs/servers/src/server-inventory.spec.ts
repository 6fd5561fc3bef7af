import { inventoryReferencesOf } from './server-inventory';

describe('inventoryReferencesOf', () => {
  it('matches a tagged name as given and an untagged one also as :latest', () => {
    expect(inventoryReferencesOf('workspace-server/desktop:4450b45f139a')).toEqual(['workspace-server/desktop:4450b45f139a']);
    expect(inventoryReferencesOf('desk')).toEqual(['desk', 'desk:latest']);
    expect(inventoryReferencesOf('localhost:5000/desk')).toEqual(['localhost:5000/desk', 'localhost:5000/desk:latest']);
    expect(inventoryReferencesOf('sha256:abc')).toEqual(['sha256:abc']);
    expect(inventoryReferencesOf('desk@sha256:abc')).toEqual(['desk@sha256:abc']);
  });
});
