import { Global, Inject, Module, OnModuleInit } from '@nestjs/common';
import { APP_GUARD, HttpAdapterHost } from '@nestjs/core';
import { FastifyInstance } from 'fastify';
import { AuthGuard } from './auth.guards';
import { installAuthHooks } from './auth.hooks';
import { AuthService } from './auth.service';

/**
 * Authentication, named callers, classification markings and the browser-origin
 * guard, for every route at once: a global guard (origin → caller → marking,
 * in that order) and a request hook, which also answers what Nest's router never
 * sees (preflights, 404s) and echoes X-Classification on every answer.
 * See libs/auth/README.md.
 */
@Global()
@Module({
  providers: [
    AuthService,
    { provide: APP_GUARD, useClass: AuthGuard },
  ],
  exports: [AuthService],
})
export class AuthModule implements OnModuleInit {
  constructor(
    @Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost,
    @Inject(AuthService) private readonly auth: AuthService,
  ) {}

  onModuleInit(): void {
    const instance = this.adapterHost.httpAdapter?.getInstance?.() as FastifyInstance | undefined;
    if (instance && typeof instance.addHook === 'function') installAuthHooks(instance, this.auth);
  }
}
