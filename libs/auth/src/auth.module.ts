import { Global, Inject, Module, OnModuleInit } from '@nestjs/common';
import { APP_GUARD, APP_INTERCEPTOR, HttpAdapterHost } from '@nestjs/core';
import { FastifyInstance } from 'fastify';
import { CallerGuard, ClassificationGuard, OriginGuard } from './auth.guards';
import { installAuthHooks } from './auth.hooks';
import { AuthService } from './auth.service';
import { ClassificationEchoInterceptor } from './classification.interceptor';

/**
 * Authentication, named callers, classification markings and the browser-origin
 * guard, for every route at once: three global guards (origin → caller →
 * marking, in that order), a global interceptor for the X-Classification echo,
 * and a request hook for what Nest's router never sees (preflights, 404s).
 * See libs/auth/README.md.
 */
@Global()
@Module({
  providers: [
    AuthService,
    { provide: APP_GUARD, useClass: OriginGuard },
    { provide: APP_GUARD, useClass: CallerGuard },
    { provide: APP_GUARD, useClass: ClassificationGuard },
    { provide: APP_INTERCEPTOR, useClass: ClassificationEchoInterceptor },
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
