import { randomSecret } from '@ws/common';
import type { Image } from '@ws/images';
import type { NewWorkspace } from '../lifecycle/workspace-lifecycle.service';

/**
 * What every new workspace row starts with, a launch's and a staging refill's alike: the image's size, fresh
 * secrets (VNC password, view-only token, share id), no container yet, its dates from `start`. Callers add what
 * is theirs (a launch: owner token, sharing, environment, options; a refill: its staging config).
 */
export function newWorkspaceFields(input: {
  id: string;
  userId: string | null;
  image: Pick<Image, 'id' | 'cores' | 'memory'>;
  serverId: string | null;
  start: Date;
  expirationDate: Date;
  operationalMessage: string;
}): NewWorkspace {
  const { id, userId, image, serverId, start, expirationDate, operationalMessage } = input;
  return {
    id, userId, imageId: image.id, serverId, operationalMessage, operationalProgress: 0, containerId: null, containerIp: null, hostPorts: {},
    cores: image.cores, memory: image.memory, token: randomSecret(32), viewOnlyToken: randomSecret(32), shareId: randomSecret(16), sharingEnabled: false,
    environment: {}, sessionTokenId: null, launchOptions: {}, persistentProfileMode: null, isPersistentProfile: false,
    startDate: start, keepaliveDate: start, expirationDate, destroyedAt: null, destroyReason: null,
  };
}
