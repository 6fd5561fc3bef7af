// What other libraries and the apps use of @ws/servers; everything else is internal to it.
export { Server } from './server.entity';
export { ServersModule } from './servers.module';
export { LOCAL_SERVER, ServersService, checkCapacitySettings } from './servers.service';
