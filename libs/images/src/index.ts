// What other libraries and the apps use of @ws/images; everything else is internal to it.
export { Image, ImageAttribute } from './image.entity';
export { toImageRef, toImageResponse } from './image.mappers';
export { ImagesModule } from './images.module';
export { ImagesService, portMapOf } from './images.service';
export type { ImageDefinition } from './images.service';
export { ServerCredentialCipher, ServerCredentialError } from './server-credentials';
export { ServerImagesService } from './server-images.service';
export { ServerTargetRecord } from './server-target.entity';
export { checkServerTarget, checkTargetHost, resolveConnection, sessionModeOf } from './server-target';
export type { RdpClientType, ServerProtocol, ServerSessionMode } from './server-target';
export { TargetAddressPolicy } from './target-address';
export type { AddressKind, TargetCheck, TargetWording } from './target-address';
