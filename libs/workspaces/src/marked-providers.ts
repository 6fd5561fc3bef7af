import type { DiscoveryService, Reflector } from '@nestjs/core';

/**
 * The instances of every module's providers whose class carries `key` (a plug-in marker such as
 * @LaunchStepProvider), each once: how the launch and the provision job find what other libraries contribute.
 */
export function markedProviders<T>(discovery: DiscoveryService, reflector: Reflector, key: string): T[] {
  return [...new Set(
    discovery.getProviders()
      .filter((wrapper) => wrapper.metatype && wrapper.instance && reflector.get<boolean>(key, wrapper.metatype))
      .map((wrapper) => wrapper.instance as T),
  )];
}
